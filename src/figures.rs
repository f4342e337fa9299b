//! SVG figures of result rows, drawn with `plotters`: for each problem (workload, preset and size), the time
//! of every row with its ratio to the native model, the accuracy against the float64 reference beside the
//! tolerance, registers and occupancy, the fraction of the hardware floor, and the time of each kernel where
//! rows report steps. Every figure's title names the problem, the devices and the commits it shows. Like
//! `crate::report`, this reads rows only, never a workload.

use crate::report::{fmt_time, native_row, sections, Section};
use crate::results::Row;
use plotters::prelude::*;
use std::path::Path;

/// One written figure: its section and title (for the report's caption) and file name (relative to the
/// report).
#[derive(Debug, Clone)]
pub struct Figure {
    pub problem: String,
    pub title: String,
    pub file: String,
}

/// What [`write_figures`] made: the figures in report order, and notes on what it chose not to draw.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    pub list: Vec<Figure>,
    pub notes: Vec<String>,
}

const WIDTH: u32 = 900;
const ROW_HEIGHT: u32 = 26;
const MARGINS: u32 = 110;
const LABEL_AREA: u32 = 300;
/// A chart with more bars than this is not drawn (the rows stay in the tables and in results.jsonl).
const MAX_BARS: usize = 400;
/// The section of the study-wide figures.
const STUDY: &str = "the whole study";

/// A file-name stem: workload, preset and a short hash of the section's key.
fn stem(key: &str, workload: &str, preset: &str) -> String {
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    let clean = |s: &str| {
        s.chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect::<String>()
    };
    format!(
        "{}-{}-{:06x}",
        clean(workload),
        clean(preset),
        hash & 0xff_ffff
    )
}

/// The subtitle lines of a figure: the devices, then the commits (at most six named).
fn provenance(rows: &[&Row]) -> Vec<String> {
    let mut devices: Vec<&str> = Vec::new();
    let mut commits: Vec<String> = Vec::new();
    for r in rows {
        if r.device != "-" && !devices.contains(&r.device.as_str()) {
            devices.push(&r.device);
        }
        let c = format!(
            "{}{}",
            r.provenance.git_commit,
            if r.provenance.git_dirty { "+" } else { "" }
        );
        if !commits.contains(&c) {
            commits.push(c);
        }
    }
    let more = commits.len().saturating_sub(6);
    commits.truncate(6);
    let mut commit_line = format!("commit {}", commits.join(", "));
    if more > 0 {
        commit_line.push_str(&format!(" and {more} more"));
    }
    let mut lines = Vec::new();
    // The device list broken after a comma to fit the figure's width.
    let mut line = String::from("devices:");
    for (i, d) in devices.iter().enumerate() {
        let piece = format!(" {d}{}", if i + 1 < devices.len() { "," } else { "" });
        if line.chars().count() + piece.chars().count() > FOOTER_CHARS {
            lines.push(std::mem::replace(&mut line, String::from("    ")));
        }
        line.push_str(&piece);
    }
    lines.push(line);
    lines.push(commit_line);
    lines
}

/// Characters of an 11-point footer line that fit in [`WIDTH`].
const FOOTER_CHARS: usize = 140;

/// A bar's label: backend and mode, the problem first in a suite, and the device too where backend and
/// mode alone would repeat (the `cpu` model on two machines or thread counts), or else the commit, or else
/// the file the row was read from.
fn label(r: &Row, rows: &[&Row], names: &[(String, String)]) -> String {
    let short = format!("{} {}", r.backend, r.precision);
    let same: Vec<&&Row> = rows
        .iter()
        .filter(|o| o.backend == r.backend && o.precision == r.precision && o.size == r.size)
        .collect();
    let short = if same.iter().any(|o| o.device != r.device) {
        format!("{short} [{}]", short_device(&r.device))
    } else if same
        .iter()
        .any(|o| o.provenance.git_commit != r.provenance.git_commit)
    {
        // The same run at several commits (a regression study).
        format!("{short} [{}]", r.provenance.git_commit)
    } else if same.len() > 1 {
        // The same commit built or run several ways (kernel shapes, repeats): the file it came from.
        format!("{short} [{}]", r.source)
    } else {
        short
    };
    match names.iter().find(|(size, _)| *size == r.size) {
        Some((_, name)) => format!("{name} · {short}"),
        None => short,
    }
}

/// A horizontal bar chart: one bar per (label, value, note), the first at the top, values on a log or
/// linear axis, each bar's note written at its end.
struct Bars {
    title: String,
    /// Lines under the chart: the problem, devices and commits.
    subtitle: Vec<String>,
    x_label: String,
    log: bool,
    bars: Vec<(String, f64, String)>,
    /// A reference value drawn as a red line across each bar (its tolerance), if any.
    marks: Vec<Option<f64>>,
}

/// The grey lines under a chart, one per 16 px.
fn draw_footer(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    lines: &[String],
) -> Result<(), String> {
    for (i, line) in lines.iter().enumerate() {
        area.draw(&Text::new(
            line.clone(),
            (10, 16 * i as i32),
            ("sans-serif", 11).into_font().color(&RGBColor(90, 90, 90)),
        ))
        .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Units of the y axis per bar: the bar spans [1, 3] of its 4, its label sits at 2.
const SLOT: i32 = 4;

impl Bars {
    fn draw(&self, path: &Path) -> Result<(), String> {
        let n = self.bars.len().max(1) as i32;
        // Small charts keep a height at which plotters' relative label sizes stay legible.
        let foot = 16 * self.subtitle.len() as u32;
        let height = (MARGINS + foot + ROW_HEIGHT * n as u32).max(240);
        let root = SVGBackend::new(path, (WIDTH, height)).into_drawing_area();
        let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let (root, footer) = root.split_vertically(height - foot);
        draw_footer(&footer, &self.subtitle).map_err(|e| err(&e))?;
        let values = self
            .bars
            .iter()
            .map(|b| b.1)
            .chain(self.marks.iter().flatten().copied())
            .filter(|v| v.is_finite() && (!self.log || *v > 0.0));
        let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
        let (lo, hi) = if lo.is_finite() {
            (lo, hi)
        } else {
            (1.0, 10.0)
        };
        let names: Vec<String> = self.bars.iter().map(|b| b.0.clone()).collect();
        let y_fmt = |y: &i32| {
            if y.rem_euclid(SLOT) == SLOT / 2 {
                let slot = (n - 1 - y / SLOT) as usize;
                names.get(slot).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        let mut builder = ChartBuilder::on(&root);
        builder
            .caption(&self.title, ("sans-serif", 15))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(LABEL_AREA);
        let y_range = 0i32..n * SLOT;
        let ticks = (n * SLOT + 1) as usize;
        // The same chart on a log or a linear x axis (two coordinate types, so a macro, not a function).
        macro_rules! plot {
            ($x:expr, $x_fmt:expr, $base:expr) => {{
                let mut chart = builder
                    .build_cartesian_2d($x, y_range)
                    .map_err(|e| err(&e))?;
                chart
                    .configure_mesh()
                    .y_labels(ticks)
                    .y_label_formatter(&y_fmt)
                    .x_label_formatter(&$x_fmt)
                    .x_desc(self.x_label.as_str())
                    .disable_y_mesh()
                    .draw()
                    .map_err(|e| err(&e))?;
                self.draw_bars(&mut chart, $base).map_err(|e| err(&e))?;
            }};
        }
        if self.log {
            let (lo, hi) = (lo / 2.0, hi * 8.0);
            plot!((lo..hi).log_scale(), |x: &f64| format!("{x:.0e}"), lo);
        } else {
            let hi = if hi > 0.0 { hi * 1.3 } else { 1.0 };
            plot!(0f64..hi, |x: &f64| format!("{x:.0}"), 0.0);
        }
        root.present().map_err(|e| err(&e))
    }

    fn draw_bars<X>(
        &self,
        chart: &mut ChartContext<
            '_,
            SVGBackend<'_>,
            Cartesian2d<X, plotters::coord::types::RangedCoordi32>,
        >,
        base: f64,
    ) -> Result<(), String>
    where
        X: Ranged<ValueType = f64>,
    {
        let e = |e: &dyn std::fmt::Display| e.to_string();
        let n = self.bars.len() as i32;
        let bar = RGBColor(70, 110, 180).filled();
        let mark = RGBColor(200, 40, 40).stroke_width(2);
        for (i, (_, value, note)) in self.bars.iter().enumerate() {
            let y = (n - 1 - i as i32) * SLOT;
            let drawn = value.is_finite() && *value > base;
            if drawn {
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(base, y + 1), (*value, y + 3)],
                        bar,
                    )))
                    .map_err(|x| e(&x))?;
            }
            if !note.is_empty() {
                let at = if drawn { *value } else { base };
                chart
                    .draw_series(std::iter::once(Text::new(
                        note.clone(),
                        (at, y + 3),
                        ("sans-serif", 12).into_font().color(&BLACK),
                    )))
                    .map_err(|x| e(&x))?;
            }
            if let Some(Some(m)) = self.marks.get(i) {
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(*m, y), (*m, y + SLOT)],
                        mark,
                    )))
                    .map_err(|x| e(&x))?;
            }
        }
        Ok(())
    }
}

/// Writes every figure the rows support into `dir`: per workload and preset (a suite of problems as one
/// section), then the cubature coverage, then the whole study when the rows hold several sections.
pub fn write_figures(dir: &Path, rows: &[Row]) -> Result<Figures, String> {
    let mut out = Figures::default();
    let groups = sections(rows);
    for group in &groups {
        section_figures(dir, group, &mut out)?;
    }
    let claimed: Vec<&Row> = rows
        .iter()
        .filter(|r| coverage_point(r).is_some())
        .collect();
    if !claimed.is_empty() {
        let file = "cubature-coverage.svg".to_string();
        let title = "true error against reported error of every claim of convergence";
        coverage_chart(&dir.join(&file), &claimed)?;
        out.list.push(Figure {
            problem: "cubature: coverage of the claims".into(),
            title: title.into(),
            file,
        });
    }
    if groups.len() > 1 {
        study_figures(dir, &groups, rows, &mut out)?;
    }
    Ok(out)
}

/// Adds one chart to `out` as `{stem}-{kind}.svg`, or a note when it has nothing to show or too many bars.
fn emit(
    dir: &Path,
    out: &mut Figures,
    section: &str,
    stem: &str,
    kind: &str,
    bars: Bars,
) -> Result<(), String> {
    if bars.bars.is_empty() {
        return Ok(());
    }
    if bars.bars.len() > MAX_BARS {
        out.notes.push(format!(
            "{section}: the {kind} chart is not drawn ({} bars, more than {MAX_BARS}); the figures are in the rows",
            bars.bars.len()
        ));
        return Ok(());
    }
    let file = format!("{stem}-{kind}.svg");
    bars.draw(&dir.join(&file))?;
    out.list.push(Figure {
        problem: section.to_string(),
        title: bars.title.clone(),
        file,
    });
    Ok(())
}

/// Time (with the ratio to the native model), accuracy, registers, floor fraction and per-kernel time of one
/// workload and preset.
fn section_figures(dir: &Path, group: &Section, out: &mut Figures) -> Result<(), String> {
    let rows = &group.rows;
    let first = rows[0];
    let stem = stem(&group.key, &first.workload, &first.preset);
    let head = format!("{} {}", first.workload, first.preset);
    let title = |what: &str| format!("{head}: {what}");
    let mut subtitle = provenance(rows);
    subtitle.insert(
        0,
        if group.suite {
            group.key.clone()
        } else {
            first.size.clone()
        },
    );
    let lab = |r: &Row| label(r, rows, &group.names);
    let chart = |what: &str, x_label: &str, log: bool| Bars {
        title: title(what),
        subtitle: subtitle.clone(),
        x_label: x_label.into(),
        log,
        bars: Vec::new(),
        marks: Vec::new(),
    };
    let mut time = chart(
        "median time (ratio to the native model)",
        "median time (s, log scale)",
        true,
    );
    for r in rows.iter().filter(|r| r.time_s.is_some()) {
        let t = r.time_s.as_ref().map(|t| t.median).unwrap_or(f64::NAN);
        let note = match native_row(r, rows.iter().copied()) {
            Some((n, model)) if !std::ptr::eq(n, *r) => n
                .time_s
                .as_ref()
                .map(|nt| format!("  {} ({:.2}× {model})", fmt_time(t), t / nt.median)),
            _ => None,
        };
        time.bars.push((
            lab(r),
            t,
            note.unwrap_or_else(|| format!("  {}", fmt_time(t))),
        ));
    }
    emit(dir, out, &group.key, &stem, "time", time)?;

    let accurate: Vec<&&Row> = rows.iter().filter(|r| r.accuracy.is_some()).collect();
    let unit = accurate
        .first()
        .and_then(|r| r.accuracy.as_ref())
        .map(|a| a.unit.clone())
        .unwrap_or_default();
    let mut accuracy = chart(
        "error against the float64 reference",
        &format!("max abs error ({unit}, log scale); red: tolerance"),
        true,
    );
    for r in &accurate {
        let a = r.accuracy.as_ref().expect("filtered");
        // An exact result has no bar on a log axis: say so.
        let note = if a.max_abs == 0.0 {
            "  exact".to_string()
        } else {
            format!("  {:.1e}", a.max_abs)
        };
        accuracy.bars.push((lab(r), a.max_abs, note));
        accuracy
            .marks
            .push(Some(a.tolerance_abs).filter(|t| t.is_finite() && *t > 0.0));
    }
    emit(dir, out, &group.key, &stem, "accuracy", accuracy)?;

    let mut registers = chart(
        "registers per thread and occupancy",
        "registers per thread",
        false,
    );
    for r in rows {
        let Some(res) = r.resources.as_ref().filter(|x| x.regs_per_thread.is_some()) else {
            continue;
        };
        let regs = res.regs_per_thread.unwrap_or(0) as f64;
        let note = res
            .occupancy
            .map(|o| format!("  {regs:.0}, occupancy {:.0} %", 100.0 * o))
            .unwrap_or_else(|| format!("  {regs:.0}"));
        registers.bars.push((lab(r), regs, note));
    }
    emit(dir, out, &group.key, &stem, "registers", registers)?;

    let mut floor = chart(
        "fraction of the hardware floor",
        "floor time / median time (%)",
        false,
    );
    for r in rows {
        if let Some(l) = &r.limit {
            let pct = 100.0 * l.fraction;
            floor.bars.push((lab(r), pct, format!("  {pct:.0} %")));
        }
    }
    emit(dir, out, &group.key, &stem, "floor", floor)?;

    // Per kernel: the steps of rows that report them (device rows), with the ratio to the native model's
    // kernel of the same name.
    let mut kernels = chart(
        "time per kernel (ratio to the native model's kernel)",
        "median time per kernel (s, log scale)",
        true,
    );
    for r in rows.iter().filter(|r| !r.steps.is_empty()) {
        let native = native_row(r, rows.iter().copied()).filter(|(n, _)| !std::ptr::eq(*n, *r));
        for (i, s) in r.steps.iter().enumerate() {
            let regs = s
                .resources
                .as_ref()
                .and_then(|x| x.regs_per_thread)
                .map(|g| format!(", {g} regs"))
                .unwrap_or_default();
            let ratio = native
                .and_then(|(n, model)| {
                    // The step at the same place, else the first of the same name.
                    let same = n
                        .steps
                        .get(i)
                        .filter(|o| o.name == s.name)
                        .or_else(|| n.steps.iter().find(|o| o.name == s.name))?;
                    Some(format!(" ({:.2}× {model})", s.median_s / same.median_s))
                })
                .unwrap_or_default();
            kernels.bars.push((
                format!("{} #{i} {}", lab(r), s.name),
                s.median_s,
                format!("  {}{ratio}{regs}", fmt_time(s.median_s)),
            ));
        }
    }
    emit(dir, out, &group.key, &stem, "kernels", kernels)
}

/// (reported relative error, true relative error, method, covered) of a row that claims convergence.
fn coverage_point(r: &Row) -> Option<(f64, f64, String, bool)> {
    let d = r.details.as_ref()?;
    let covered = d.get("covered")?.as_bool()?;
    let reported = d.get("error")?.as_f64()? / d.get("estimate")?.as_f64()?.abs();
    let truth = d.get("true_rel_error")?.as_f64()?;
    let method = d.get("method").and_then(|m| m.as_str()).unwrap_or("?");
    Some((reported, truth, method.to_string(), covered))
}

/// Relative errors below this are drawn on it (a log axis has no zero).
const ERROR_FLOOR: f64 = 1e-17;

/// The coverage plot: for every claim of convergence, the true relative error against the reported one, on
/// log axes with the diagonal; a claim is honest on or under the diagonal (m-Cubes reports one sigma, so
/// about a third of its honest claims lie above it, and rows fail only beyond 4 sigma).
fn coverage_chart(path: &Path, rows: &[&Row]) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let points: Vec<(f64, f64, String, bool)> =
        rows.iter().filter_map(|r| coverage_point(r)).collect();
    let clamp = |v: f64| v.max(ERROR_FLOOR);
    let (lo, hi) = points.iter().fold((f64::INFINITY, 0f64), |(lo, hi), p| {
        (lo.min(clamp(p.0)).min(clamp(p.1)), hi.max(p.0).max(p.1))
    });
    let (lo, hi) = (lo / 3.0, hi.max(lo) * 3.0);
    let floored = points.iter().filter(|p| p.1 < ERROR_FLOOR).count();
    let mut foot = provenance(rows);
    foot.insert(
        0,
        format!(
            "{} claims; {} covered; {floored} with a true error under {ERROR_FLOOR:e} drawn at {ERROR_FLOOR:e}",
            points.len(),
            points.iter().filter(|p| p.3).count()
        ),
    );
    let height = 640 + 16 * foot.len() as u32;
    let root = SVGBackend::new(path, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (root, footer) = root.split_vertically(640);
    draw_footer(&footer, &foot)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "cubature: true error against reported error",
            ("sans-serif", 15),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((lo..hi).log_scale(), (lo..hi).log_scale())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("reported relative error (log scale)")
        .y_desc("true relative error |estimate − truth| / |truth| (log scale)")
        .x_label_formatter(&|x| format!("{x:.0e}"))
        .y_label_formatter(&|y| format!("{y:.0e}"))
        .draw()
        .map_err(|e| err(&e))?;
    chart
        .draw_series(LineSeries::new(
            vec![(lo, lo), (hi, hi)],
            BLACK.stroke_width(1),
        ))
        .map_err(|e| err(&e))?
        .label("true = reported")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK));
    let mut methods: Vec<&str> = points.iter().map(|p| p.2.as_str()).collect();
    methods.sort();
    methods.dedup();
    let palette = [
        RGBColor(70, 110, 180),
        RGBColor(230, 140, 30),
        RGBColor(60, 160, 90),
    ];
    for (k, method) in methods.iter().enumerate() {
        let color = palette[k % palette.len()];
        chart
            .draw_series(
                points
                    .iter()
                    .filter(|p| p.2 == *method && p.3)
                    .map(|p| Circle::new((clamp(p.0), clamp(p.1)), 3, color.filled())),
            )
            .map_err(|e| err(&e))?
            .label(format!("{method}: covered"))
            .legend(move |(x, y)| Circle::new((x + 8, y), 3, color.filled()));
    }
    let red = RGBColor(200, 40, 40);
    chart
        .draw_series(
            points
                .iter()
                .filter(|p| !p.3)
                .map(|p| Cross::new((clamp(p.0), clamp(p.1)), 5, red.stroke_width(2))),
        )
        .map_err(|e| err(&e))?
        .label("not covered (true > reported)")
        .legend(move |(x, y)| Cross::new((x + 8, y), 5, red.stroke_width(2)));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}

/// A device name short enough for a label: "H200", "AMD EPYC (2 threads)", "Xeon" (PoCL's
/// "pthread-haswell-" prefix and the vendors' "NVIDIA", "(R)", "Processor" dropped).
fn short_device(device: &str) -> String {
    let mut d = device
        .replace("NVIDIA ", "")
        .replace("(R)", "")
        .replace(" Processor", "");
    if d.starts_with("pthread-") {
        // PoCL: pthread-<cpu architecture>-<name>; the architecture may hold dashes but not the vendor.
        for vendor in ["AMD", "Intel"] {
            if let Some(i) = d.find(vendor) {
                d = d[i..].to_string();
                break;
            }
        }
    }
    d.replace("Intel Xeon", "Xeon").trim().to_string()
}

/// Geometric mean (for ratios and fractions across a suite's problems).
fn geomean(values: &[f64]) -> f64 {
    (values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp()
}

/// The whole study on three charts: every backend and mode's ratio to its native model, its fraction of the
/// hardware floor, and its worst error as a fraction of the tolerance, one bar per section (a suite's bar is
/// the geometric mean over its problems, or the worst error).
fn study_figures(
    dir: &Path,
    groups: &[Section],
    rows: &[Row],
    out: &mut Figures,
) -> Result<(), String> {
    let all: Vec<&Row> = rows.iter().collect();
    let mut subtitle = provenance(&all);
    subtitle.insert(0, format!("{} sections, {} rows", groups.len(), rows.len()));
    let chart = |what: &str, x_label: &str, log: bool| Bars {
        title: format!("whole study: {what}"),
        subtitle: subtitle.clone(),
        x_label: x_label.into(),
        log,
        bars: Vec::new(),
        marks: Vec::new(),
    };
    let mut ratio = chart(
        "ratio to the native model (red: parity)",
        "median time / native model's (log scale; right of red is slower)",
        true,
    );
    let mut floor = chart(
        "fraction of the hardware floor",
        "floor time / median time (%)",
        false,
    );
    let mut accuracy = chart(
        "worst error as a fraction of the tolerance (red: the tolerance)",
        "max abs error / tolerance (log scale)",
        true,
    );
    for g in groups {
        let head = format!("{} {}", g.rows[0].workload, g.rows[0].preset);
        // Bars per (backend, mode, device) of the section, in first-seen order.
        let mut keys: Vec<(&str, &str, &str)> = Vec::new();
        for r in &g.rows {
            let k = (r.backend.as_str(), r.precision.as_str(), r.device.as_str());
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        for (backend, precision, device) in keys {
            let of: Vec<&Row> = g
                .rows
                .iter()
                .copied()
                .filter(|r| r.backend == backend && r.precision == precision && r.device == device)
                .collect();
            let suffix = if g.suite && of.len() > 1 {
                format!(" ({} problems)", of.len())
            } else {
                String::new()
            };
            let name = format!("{head} · {backend} {precision} [{}]", short_device(device));
            let ratios: Vec<(f64, &str)> = of
                .iter()
                .filter_map(|r| {
                    let (n, model) = native_row(r, g.rows.iter().copied())?;
                    // The native model's own rows are the reference, not a port.
                    (r.model != model).then_some(())?;
                    Some((r.time_s.as_ref()?.median / n.time_s.as_ref()?.median, model))
                })
                .collect();
            if !ratios.is_empty() {
                let values: Vec<f64> = ratios.iter().map(|x| x.0).collect();
                let x = geomean(&values);
                ratio.bars.push((
                    name.clone(),
                    x,
                    format!("  {x:.2}× {}{suffix}", ratios[0].1),
                ));
                ratio.marks.push(Some(1.0));
            }
            let fractions: Vec<f64> = of
                .iter()
                .filter_map(|r| r.limit.as_ref())
                .map(|l| l.fraction)
                .collect();
            if !fractions.is_empty() {
                let x = 100.0 * geomean(&fractions);
                floor
                    .bars
                    .push((name.clone(), x, format!("  {x:.0} %{suffix}")));
            }
            let worst = of
                .iter()
                .filter_map(|r| r.accuracy.as_ref())
                .filter(|a| a.tolerance_abs.is_finite() && a.tolerance_abs > 0.0)
                .map(|a| a.max_abs / a.tolerance_abs)
                .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
            if let Some(x) = worst {
                let note = if x == 0.0 {
                    "  exact".to_string()
                } else {
                    format!("  {x:.1e}{suffix}")
                };
                accuracy.bars.push((name, x, note));
                accuracy.marks.push(Some(1.0));
            }
        }
    }
    emit(dir, out, STUDY, "study", "ratio", ratio)?;
    emit(dir, out, STUDY, "study", "floor", floor)?;
    emit(dir, out, STUDY, "study", "accuracy", accuracy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names_shorten_for_labels() {
        assert_eq!(short_device("NVIDIA H200"), "H200");
        assert_eq!(short_device("pthread-haswell-AMD EPYC"), "AMD EPYC");
        assert_eq!(
            short_device("pthread-skylake-avx512-Intel(R) Xeon(R) Processor"),
            "Xeon"
        );
        assert_eq!(short_device("AMD EPYC (2 threads)"), "AMD EPYC (2 threads)");
    }
}
