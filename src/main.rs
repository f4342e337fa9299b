fn main() {
    std::process::exit(astroport::cli::main());
}
