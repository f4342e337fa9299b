/// mimalloc, not the system allocator: glibc serves the many 0.1-0.2 MB buffers that parallel loops make
/// (the fit's basis images, its stamp batches) with fresh mappings and gives them back at once, and on a
/// virtual machine every unmapping interrupts all cores to flush their TLBs. On the 2-core VM that was
/// 2.0 s of system time in a 2.7 s subtraction at 2048² (docs/perf-notes.md, "allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(astroport::cli::main());
}
