//! SVG figures of result rows, drawn with `plotters`: for each problem (workload, preset and size), the time
//! of every row with its ratio to the native model, the accuracy against the float64 reference beside the
//! tolerance, registers and occupancy, the fraction of the hardware floor, and the time of each kernel where
//! rows report steps. Every figure's title names the problem, the devices and the commits it shows. Like
//! `crate::report`, this reads rows only, never a workload.

use crate::report::{fmt_time, native_ratio};
use crate::results::Row;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// One written figure: its title (for the report's caption) and file name (relative to the report).
#[derive(Debug, Clone)]
pub struct Figure {
    pub problem: String,
    pub title: String,
    pub file: String,
}

const WIDTH: u32 = 900;
const ROW_HEIGHT: u32 = 26;
const MARGINS: u32 = 110;
const LABEL_AREA: u32 = 300;

/// The rows of one problem, in their order.
struct Group<'a> {
    key: String,
    rows: Vec<&'a Row>,
}

fn groups(rows: &[Row]) -> Vec<Group<'_>> {
    let mut out: Vec<Group> = Vec::new();
    for r in rows {
        let key = format!("{} {} ({})", r.workload, r.preset, r.size);
        match out.iter_mut().find(|g| g.key == key) {
            Some(g) => g.rows.push(r),
            None => out.push(Group { key, rows: vec![r] }),
        }
    }
    out
}

/// A file-name stem from a problem: workload, preset and a short hash of the size line.
fn stem(rows: &[&Row]) -> String {
    let r = rows[0];
    let hash = r.size.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    let clean = |s: &str| {
        s.chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect::<String>()
    };
    format!(
        "{}-{}-{:06x}",
        clean(&r.workload),
        clean(&r.preset),
        hash & 0xff_ffff
    )
}

/// "device names; commits" for a title.
fn provenance(rows: &[&Row]) -> String {
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
    format!("{}; commit {}", devices.join(", "), commits.join(", "))
}

/// A bar's label: backend and mode, and the device too where that alone would repeat (the `cpu` model on
/// two machines or thread counts).
fn label(r: &Row, rows: &[&Row]) -> String {
    let short = format!("{} {}", r.backend, r.precision);
    let same = rows
        .iter()
        .filter(|o| o.backend == r.backend && o.precision == r.precision)
        .count();
    if same > 1 {
        // The end of the name: where thread counts and model numbers are.
        let chars: Vec<char> = r.device.chars().collect();
        let device: String = chars[chars.len().saturating_sub(22)..].iter().collect();
        format!("{short} [{}]", device.trim())
    } else {
        short
    }
}

/// A horizontal bar chart: one bar per (label, value, note), the first at the top, values on a log or
/// linear axis, each bar's note written at its end.
struct Bars {
    title: String,
    subtitle: String,
    x_label: String,
    log: bool,
    bars: Vec<(String, f64, String)>,
    /// A reference value drawn as a red line across each bar (its tolerance), if any.
    marks: Vec<Option<f64>>,
}

/// Units of the y axis per bar: the bar spans [1, 3] of its 4, its label sits at 2.
const SLOT: i32 = 4;

impl Bars {
    fn draw(&self, path: &Path) -> Result<(), String> {
        let n = self.bars.len().max(1) as i32;
        // Small charts keep a height at which plotters' relative label sizes stay legible.
        let height = (MARGINS + ROW_HEIGHT * n as u32).max(240);
        let root = SVGBackend::new(path, (WIDTH, height)).into_drawing_area();
        let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
        root.fill(&WHITE).map_err(|e| err(&e))?;
        root.draw(&Text::new(
            self.subtitle.clone(),
            (10, height as i32 - 16),
            ("sans-serif", 11).into_font().color(&RGBColor(90, 90, 90)),
        ))
        .map_err(|e| err(&e))?;
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
            .margin_bottom(28)
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

/// Writes every figure the rows support into `dir`; returns them in report order.
pub fn write_figures(dir: &Path, rows: &[Row]) -> Result<Vec<Figure>, String> {
    let mut figures = Vec::new();
    for group in groups(rows) {
        let rows = &group.rows;
        let stem = stem(rows);
        let prov = provenance(rows);
        let mut emit = |kind: &str, what: &str, bars: Bars| -> Result<(), String> {
            if bars.bars.is_empty() {
                return Ok(());
            }
            let file = format!("{stem}-{kind}.svg");
            let path: PathBuf = dir.join(&file);
            bars.draw(&path)?;
            figures.push(Figure {
                problem: group.key.clone(),
                title: what.to_string(),
                file,
            });
            Ok(())
        };
        let all: Vec<Row> = rows.iter().map(|r| (*r).clone()).collect();
        let timed: Vec<&&Row> = rows.iter().filter(|r| r.time_s.is_some()).collect();
        let head = format!("{} {}", rows[0].workload, rows[0].preset);
        let title = |what: &str| format!("{head}: {what}");
        let subtitle = format!("{} | {prov}", rows[0].size);
        emit(
            "time",
            "median time per backend and mode (ratio to the native model)",
            Bars {
                subtitle: subtitle.clone(),
                title: title("median time"),
                x_label: "median time (s, log scale)".into(),
                log: true,
                bars: timed
                    .iter()
                    .map(|r| {
                        let t = r.time_s.as_ref().map(|t| t.median).unwrap_or(f64::NAN);
                        let ratio = native_ratio(r, &all)
                            .map(|(x, native)| format!("  {} ({x:.2}× {native})", fmt_time(t)))
                            .unwrap_or_else(|| format!("  {}", fmt_time(t)));
                        (label(r, rows), t, ratio)
                    })
                    .collect(),
                marks: vec![],
            },
        )?;
        let accurate: Vec<&&Row> = rows.iter().filter(|r| r.accuracy.is_some()).collect();
        emit(
            "accuracy",
            "largest error against the float64 reference (red: the tolerance)",
            Bars {
                subtitle: subtitle.clone(),
                title: title("error against the float64 reference"),
                x_label: format!(
                    "max abs error ({}, log scale); red: tolerance",
                    accurate
                        .first()
                        .and_then(|r| r.accuracy.as_ref())
                        .map(|a| a.unit.clone())
                        .unwrap_or_default()
                ),
                log: true,
                bars: accurate
                    .iter()
                    .map(|r| {
                        let a = r.accuracy.as_ref().expect("filtered");
                        // An exact result has no bar on a log axis: say so.
                        let note = if a.max_abs == 0.0 {
                            "  exact".to_string()
                        } else {
                            format!("  {:.1e}", a.max_abs)
                        };
                        (label(r, rows), a.max_abs, note)
                    })
                    .collect(),
                marks: accurate
                    .iter()
                    .map(|r| {
                        r.accuracy
                            .as_ref()
                            .map(|a| a.tolerance_abs)
                            .filter(|t| t.is_finite() && *t > 0.0)
                    })
                    .collect(),
            },
        )?;
        let resourced: Vec<&&Row> = rows
            .iter()
            .filter(|r| {
                r.resources
                    .as_ref()
                    .is_some_and(|x| x.regs_per_thread.is_some())
            })
            .collect();
        emit(
            "registers",
            "registers per thread of the main kernel, with its occupancy",
            Bars {
                subtitle: subtitle.clone(),
                title: title("registers per thread and occupancy"),
                x_label: "registers per thread".into(),
                log: false,
                bars: resourced
                    .iter()
                    .map(|r| {
                        let res = r.resources.as_ref().expect("filtered");
                        let regs = res.regs_per_thread.unwrap_or(0) as f64;
                        let occ = res
                            .occupancy
                            .map(|o| format!("  {regs:.0}, occupancy {:.0} %", 100.0 * o))
                            .unwrap_or_else(|| format!("  {regs:.0}"));
                        (label(r, rows), regs, occ)
                    })
                    .collect(),
                marks: vec![],
            },
        )?;
        let floored: Vec<&&Row> = rows.iter().filter(|r| r.limit.is_some()).collect();
        emit(
            "floor",
            "fraction of the hardware floor reached",
            Bars {
                subtitle: subtitle.clone(),
                title: title("fraction of the hardware floor"),
                x_label: "floor time / median time (%)".into(),
                log: false,
                bars: floored
                    .iter()
                    .map(|r| {
                        let l = r.limit.as_ref().expect("filtered");
                        (
                            label(r, rows),
                            100.0 * l.fraction,
                            format!("  {:.0} %", 100.0 * l.fraction),
                        )
                    })
                    .collect(),
                marks: vec![],
            },
        )?;
        // Per kernel: the steps of rows that report them (device rows), one bar per (row, step).
        let stepped: Vec<&&Row> = rows.iter().filter(|r| !r.steps.is_empty()).collect();
        emit(
            "kernels",
            "time of each kernel (step) per backend and mode, with its registers",
            Bars {
                subtitle: subtitle.clone(),
                title: title("time per kernel"),
                x_label: "median time per step (s, log scale)".into(),
                log: true,
                bars: stepped
                    .iter()
                    .flat_map(|r| {
                        r.steps.iter().enumerate().map(move |(i, s)| {
                            let regs = s
                                .resources
                                .as_ref()
                                .and_then(|x| x.regs_per_thread)
                                .map(|g| format!(", {g} regs"))
                                .unwrap_or_default();
                            (
                                format!("{} {} #{i} {}", r.backend, r.precision, s.name),
                                s.median_s,
                                format!("  {}{regs}", fmt_time(s.median_s)),
                            )
                        })
                    })
                    .collect(),
                marks: vec![],
            },
        )?;
    }
    Ok(figures)
}
