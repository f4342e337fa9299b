//! The command line, a thin layer over the library: `devices`, `run WORKLOAD` and `bench`, plus each
//! workload's own tools. Every workload, its flags and its tools come from `crate::registry`.

use crate::backend::{discover, Selector, Target};
use crate::bench::Runnable;
use crate::exec::RunOptions;
use crate::registry::{self, WORKLOADS};
use crate::report;
use crate::results::{append_jsonl, Row, Status};
use clap::{Args, FromArgMatches};
use std::path::PathBuf;

/// Flags of every command that runs workloads through the driver (`run`, `bench`).
#[derive(Args, Debug, Clone)]
pub struct RunFlags {
    /// Backend id or model, repeatable: cpu, opencl, opencl:P:D, cuda, cuda:N, sycl, sycl:N (see
    /// `astroport devices`). Default for bench: every backend found (unavailable ones get a row saying why).
    #[arg(long = "backend", global = true)]
    pub backends: Vec<String>,
    /// Directory for results.jsonl and report.md.
    #[arg(long, global = true)]
    pub out: Option<PathBuf>,
    /// Timed repeats per run (the median is reported).
    #[arg(long, default_value_t = 3, global = true, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeats: u32,
    /// Untimed warm-up runs before the repeats.
    #[arg(long, default_value_t = 1, global = true)]
    pub warmup: u32,
}

impl RunFlags {
    fn options(&self) -> RunOptions {
        RunOptions {
            warmup: self.warmup,
            repeats: self.repeats,
        }
    }
    fn selectors(&self) -> Result<Vec<Selector>, String> {
        self.backends.iter().map(|b| b.parse()).collect()
    }
}

/// Flags of `bench` beyond [`RunFlags`].
#[derive(Args, Debug, Clone)]
pub struct BenchFlags {
    /// Problem size: tiny (tests), ci (minutes on 2 cores), or a workload's own (hff, corot, survey); every
    /// workload that has this preset runs, and the others say they are skipped.
    #[arg(long, default_value = "ci")]
    pub preset: String,
    /// Modes to run (comma-separated or repeated): f32, f64, or a workload's own (mixed-budget, ...);
    /// default every mode of every workload.
    #[arg(long = "precision", value_delimiter = ',')]
    pub modes: Vec<String>,
}

/// Flags of `report`.
#[derive(Args, Debug, Clone)]
pub struct ReportFlags {
    /// results.jsonl files, or folders that hold one (from any machine, run or commit).
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Folder for report.md and the figures.
    #[arg(long)]
    pub out: PathBuf,
    /// The report's title.
    #[arg(long, default_value = "astroport report")]
    pub title: String,
    /// Keep only the last row of each problem, backend, mode and device (a re-run replaces the rows it
    /// repeats); by default every row is kept.
    #[arg(long)]
    pub latest: bool,
}

/// The last row of each (workload, preset, size, backend, mode, device), in the order of first appearance.
pub fn latest_rows(rows: Vec<Row>) -> Vec<Row> {
    let key = |r: &Row| {
        (
            r.workload.clone(),
            r.preset.clone(),
            r.size.clone(),
            r.backend.clone(),
            r.precision.clone(),
            r.device.clone(),
        )
    };
    let mut out: Vec<Row> = Vec::new();
    for r in rows {
        match out.iter_mut().find(|o| key(o) == key(&r)) {
            Some(o) => *o = r,
            None => out.push(r),
        }
    }
    out
}

/// Rows from results.jsonl files (a folder stands for its results.jsonl), in order, older row schemas
/// converted ([`crate::results::parse_row`]). A line that is not a row is an error naming the file and line.
pub fn read_rows(inputs: &[PathBuf]) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for input in inputs {
        let path = if input.is_dir() {
            input.join("results.jsonl")
        } else {
            input.clone()
        };
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let name = |p: &std::path::Path| {
            p.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let source = match path.parent() {
            Some(folder) if name(&path) == "results" => name(folder),
            _ => name(&path),
        };
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let mut row = crate::results::parse_row(line)
                .map_err(|e| format!("{} line {}: {e}", path.display(), i + 1))?;
            row.source = source.clone();
            rows.push(row);
        }
    }
    if rows.is_empty() {
        return Err(format!(
            "no result rows in {}",
            inputs
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(rows)
}

/// The whole command: fixed commands, then one `run` subcommand and the tools of each registered workload.
pub fn command() -> clap::Command {
    // `about` after `augment_args`: the flag structs' doc comments would replace it.
    let mut run = RunFlags::augment_args(clap::Command::new("run"))
        .about("Run workload problems on backends, verify each result against the reference, report rows")
        .subcommand_required(true);
    for entry in &WORKLOADS {
        run = run.subcommand(entry.command());
    }
    let bench = BenchFlags::augment_args(RunFlags::augment_args(clap::Command::new("bench")))
        .about(
        "The main job: every workload on every available backend and mode, verified and reported",
    );
    let mut cmd = clap::Command::new("astroport")
        .version(env!("CARGO_PKG_VERSION"))
        .arg(
            clap::Arg::new("quiet")
                .long("quiet")
                .short('q')
                .global(true)
                .action(clap::ArgAction::SetTrue)
                .conflicts_with("verbose")
                .help("Print only errors on stderr (the table, results.jsonl and report.md are still written)"),
        )
        .arg(
            clap::Arg::new("verbose")
                .long("verbose")
                .short('v')
                .global(true)
                .action(clap::ArgAction::SetTrue)
                .help("Also print each run as it starts, the reference's time, and each row's time, error and kernels"),
        )
        .about("Published GPU algorithms on every compute model, verified against float64, with the cost of portability measured.")
        .subcommand_required(true)
        .subcommand(clap::Command::new("devices").about(
            "List every model's devices with the id to pass to --backend, and what is unavailable and why",
        ))
        .subcommand(run)
        .subcommand(bench)
        .subcommand(ReportFlags::augment_args(clap::Command::new("report")).about(
            "Merge results (results.jsonl files or folders holding one) into report.md with SVG figures",
        ));
    for tool in registry::tools() {
        cmd = cmd.subcommand(tool.command());
    }
    cmd
}

/// Runs the program; returns the process exit code (0 ok, 1 a run failed verification or execution, 2 bad
/// input).
pub fn main() -> i32 {
    let matches = match command().try_get_matches() {
        Ok(m) => m,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    crate::progress::set_verbosity(if matches.get_flag("quiet") {
        crate::progress::Verbosity::Quiet
    } else if matches.get_flag("verbose") {
        crate::progress::Verbosity::Verbose
    } else {
        crate::progress::Verbosity::Normal
    });
    let code = execute(&matches);
    crate::progress::finish();
    match code {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("error: {msg}");
            2
        }
    }
}

fn execute(matches: &clap::ArgMatches) -> Result<i32, String> {
    let (name, sub) = matches.subcommand().ok_or("no command given")?;
    match name {
        "devices" => {
            print!("{}", devices_text());
            Ok(0)
        }
        "report" => {
            let flags = ReportFlags::from_arg_matches(sub).map_err(|e| e.to_string())?;
            let mut rows = read_rows(&flags.inputs)?;
            if flags.latest {
                rows = latest_rows(rows);
            }
            let path = report::write(&flags.out, &flags.title, &rows)?;
            println!("{}", report::terminal(&rows));
            crate::say!("{} rows; report in {}", rows.len(), path.display());
            Ok(0)
        }
        "run" => {
            let (workload, args) = sub.subcommand().ok_or("run needs a workload")?;
            let entry =
                registry::find(workload).ok_or_else(|| format!("no workload '{workload}'"))?;
            let flags = RunFlags::from_arg_matches(args).map_err(|e| e.to_string())?;
            if flags.backends.is_empty() {
                return Err("run needs --backend ID (see `astroport devices`)".into());
            }
            let problems = entry.build(args)?;
            run_and_report(&problems, &flags, "astroport run")
        }
        "bench" => {
            let flags = RunFlags::from_arg_matches(sub).map_err(|e| e.to_string())?;
            let bench = BenchFlags::from_arg_matches(sub).map_err(|e| e.to_string())?;
            run_bench(&flags, &bench)
        }
        tool => registry::tools()
            .find(|t| t.name == tool)
            .ok_or_else(|| format!("no command '{tool}'"))?
            .run(sub),
    }
}

/// `bench`: every workload that has the preset, in every mode (or the modes asked for), on every backend.
fn run_bench(flags: &RunFlags, bench: &BenchFlags) -> Result<i32, String> {
    let mut built: Vec<Box<dyn Runnable>> = Vec::new();
    for entry in &WORKLOADS {
        let problems = match entry.bench(&bench.preset) {
            None => {
                crate::say!(
                    "{}: skipped: no preset '{}' (it has {})",
                    entry.name,
                    bench.preset,
                    entry.presets.join(", ")
                );
                continue;
            }
            Some(problems) => problems.map_err(|e| format!("{}: {e}", entry.name))?,
        };
        built.extend(problems);
    }
    // A mode no workload offers is a typo, not a filter that happens to match nothing.
    let offered: Vec<&str> = built.iter().flat_map(|p| p.mode_names()).collect();
    if let Some(unknown) = bench.modes.iter().find(|m| !offered.contains(&m.as_str())) {
        let mut names = offered.clone();
        names.sort();
        names.dedup();
        return Err(format!(
            "--precision: no workload at preset '{}' has the mode '{unknown}' (modes: {})",
            bench.preset,
            names.join(", ")
        ));
    }
    let mut problems: Vec<Box<dyn Runnable>> = Vec::new();
    for mut p in built {
        if !bench.modes.is_empty() && p.retain_modes(&bench.modes) == 0 {
            crate::say!(
                "{}: skipped: none of the modes {} applies",
                p.title(),
                bench.modes.join(",")
            );
            continue;
        }
        problems.push(p);
    }
    if problems.is_empty() {
        return Err(format!(
            "no workload has preset '{}' and the modes asked for",
            bench.preset
        ));
    }
    let mut flags = flags.clone();
    flags.out.get_or_insert_with(|| PathBuf::from("out"));
    run_and_report(&problems, &flags, "astroport bench")
}

/// Runs each problem on the selected backends, prints the table, appends rows to results.jsonl and writes
/// report.md; exit code 1 when any run failed.
fn run_and_report(
    problems: &[Box<dyn Runnable>],
    flags: &RunFlags,
    title: &str,
) -> Result<i32, String> {
    let selectors = flags.selectors()?;
    let options = flags.options();
    // Before any work: an --out that cannot be a folder is found now, not after the runs.
    if let Some(dir) = &flags.out {
        std::fs::create_dir_all(dir).map_err(|e| format!("--out {}: {e}", dir.display()))?;
    }
    let discovery = crate::backend::discover_for(&selectors);
    let choices = discovery.select(&selectors);
    let mut rows: Vec<Row> = Vec::new();
    // Each row goes to results.jsonl as soon as it exists (one locked append of one line), so an
    // interrupted run keeps the rows it finished and the file stays valid JSON Lines.
    let mut append_error: Option<String> = None;
    let runs: usize = problems
        .iter()
        .map(|p| p.mode_names().len() * choices.len())
        .sum();
    crate::progress::start(runs as u64);
    for problem in problems {
        crate::say!("{title}: {}", problem.title());
        rows.extend(problem.run(&choices, &options, &mut |r: &Row| {
            crate::progress::advance();
            // An unavailable backend is said once, with its reason, under the table.
            if !r.status.is_unavailable() {
                crate::say!("{}", row_line(r));
                crate::detail!("{}", row_details(r));
            }
            if let (Some(dir), None) = (&flags.out, &append_error) {
                if let Err(e) = append_jsonl(dir, "results.jsonl", std::slice::from_ref(r)) {
                    append_error = Some(e.to_string());
                }
            }
        }));
    }
    crate::progress::finish();
    println!("{}", report::terminal(&rows));
    if let Some(e) = append_error {
        return Err(e);
    }
    if let Some(dir) = &flags.out {
        let path = dir.join("results.jsonl");
        let mut names: Vec<String> = Vec::new();
        for p in problems {
            let name = p.workload().to_string();
            if !names.contains(&name) {
                names.push(name);
            }
        }
        // This run's rows (results.jsonl may hold earlier runs too: `astroport report DIR` merges them all).
        let md_path = report::write(dir, &format!("{title}: {}", names.join(", ")), &rows)?;
        crate::say!(
            "rows appended to {}; report in {}",
            path.display(),
            md_path.display()
        );
    }
    let failed = rows.iter().filter(|r| r.status == Status::Failed).count();
    if failed > 0 {
        eprintln!("{failed} run(s) failed verification or execution");
        return Ok(1);
    }
    Ok(0)
}

/// A finished row in one line: backend, mode, workload, status and median time.
fn row_line(r: &Row) -> String {
    let time = r
        .time_s
        .as_ref()
        .map(|t| format!(" ({})", report::fmt_time(t.median)))
        .unwrap_or_default();
    format!(
        "  -> {} {} {}: {}{time}",
        r.backend,
        r.precision,
        r.workload,
        r.status.name()
    )
}

/// With `--verbose`: the row's error against its tolerance, its spread of times and each kernel's time.
fn row_details(r: &Row) -> String {
    let mut out = String::new();
    if let Some(a) = &r.accuracy {
        out.push_str(&format!(
            "     max abs {:.3e} {} (tolerance {:e}), max rel {:.3e}",
            a.max_abs, a.unit, a.tolerance_abs, a.max_rel
        ));
    }
    if let Some(t) = &r.time_s {
        out.push_str(&format!(
            "; {}–{} over {} repeats ({})",
            report::fmt_time(t.min),
            report::fmt_time(t.max),
            t.repeats,
            t.timer
        ));
    }
    for s in &r.steps {
        out.push_str(&format!(
            "\n     {:<28} {}",
            s.name,
            report::fmt_time(s.median_s)
        ));
    }
    if !r.reason.is_empty() {
        out.push_str(&format!(
            "\n     {}",
            r.reason.lines().next().unwrap_or_default()
        ));
    }
    out
}

/// The `devices` listing.
pub fn devices_text() -> String {
    let d = discover();
    let mut out = String::from("id            model   type  device\n");
    for t in &d.targets {
        let info = t.info();
        let extra = match t {
            Target::Cpu(_) => String::new(),
            Target::Device(_) => format!(
                "  [{}; {}; {} CUs; {:.1} GiB; fp64 {}]",
                info.platform,
                info.driver,
                info.compute_units,
                info.global_mem_bytes as f64 / (1u64 << 30) as f64,
                if info.fp64 { "yes" } else { "no" }
            ),
        };
        out.push_str(&format!(
            "{:<13} {:<7} {:<5} {}{}\n",
            t.id(),
            t.model().name(),
            if info.is_gpu { "gpu" } else { "cpu" },
            info.name,
            extra
        ));
    }
    for a in &d.absent {
        out.push_str(&format!(
            "{:<13} {:<7} -     {}: {}\n",
            a.id,
            a.model.name(),
            a.why.status(),
            a.reason
        ));
    }
    out
}
