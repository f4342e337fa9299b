//! What the program says on stderr while it works, at the level `--quiet` or `--verbose` chose, and the
//! progress bar of `run` and `bench`. Every message goes through here, so a message never tears the bar:
//! with a bar on screen it is printed above it; without one (stderr not a terminal, or `--quiet`) it is a
//! plain line, which is what logs and CI want.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// How much goes to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verbosity {
    /// Errors only (the table and files are still written).
    Quiet = 0,
    /// Each problem, each row's outcome, notes, and the progress bar.
    Normal = 1,
    /// Also each run's start, the reference's time, and each row's time, error and kernels.
    Verbose = 2,
}

static LEVEL: AtomicU8 = AtomicU8::new(Verbosity::Normal as u8);
static BAR: Mutex<Option<ProgressBar>> = Mutex::new(None);

pub fn set_verbosity(v: Verbosity) {
    LEVEL.store(v as u8, Ordering::Relaxed);
}

pub fn verbosity() -> Verbosity {
    match LEVEL.load(Ordering::Relaxed) {
        0 => Verbosity::Quiet,
        1 => Verbosity::Normal,
        _ => Verbosity::Verbose,
    }
}

/// Prints `msg` on stderr at `level` or above, above the bar when one is shown.
pub fn print(level: Verbosity, msg: &str) {
    if verbosity() < level {
        return;
    }
    let bar = BAR.lock().unwrap_or_else(|e| e.into_inner());
    match bar.as_ref() {
        Some(b) => b.suspend(|| eprintln!("{msg}")),
        None => eprintln!("{msg}"),
    }
}

/// A line at the normal level (hidden by `--quiet`).
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => { $crate::progress::print($crate::progress::Verbosity::Normal, &format!($($arg)*)) };
}

/// A line shown only with `--verbose`.
#[macro_export]
macro_rules! detail {
    ($($arg:tt)*) => { $crate::progress::print($crate::progress::Verbosity::Verbose, &format!($($arg)*)) };
}

/// Shows a bar of `total` runs with a spinner and the elapsed time, when stderr is a terminal and the level
/// is not quiet; the bar clears itself when [`finish`] is called.
pub fn start(total: u64) {
    let visible = verbosity() > Verbosity::Quiet && std::io::stderr().is_terminal();
    let bar = ProgressBar::with_draw_target(
        Some(total),
        if visible {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        },
    );
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} runs  {wide_msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    if visible {
        bar.enable_steady_tick(Duration::from_millis(120));
        *BAR.lock().unwrap_or_else(|e| e.into_inner()) = Some(bar);
    }
}

/// What is running now: the bar's message, or a line with `--verbose` when no bar is shown.
pub fn status(msg: &str) {
    let bar = BAR.lock().unwrap_or_else(|e| e.into_inner());
    match bar.as_ref() {
        Some(b) => b.set_message(msg.to_string()),
        None => {
            drop(bar);
            print(Verbosity::Verbose, &format!("  {msg} ..."));
        }
    }
}

/// One run done.
pub fn advance() {
    if let Some(b) = BAR.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        b.inc(1);
    }
}

/// Removes the bar (before the table is printed).
pub fn finish() {
    if let Some(b) = BAR.lock().unwrap_or_else(|e| e.into_inner()).take() {
        b.finish_and_clear();
    }
}
