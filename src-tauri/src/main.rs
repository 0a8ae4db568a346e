// No console window on Windows release builds.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

fn main() {
    // `countersign audit verify [PATH]` and the like run and exit before any window exists.
    let args: Vec<String> = std::env::args().skip(1).collect();
    match countersign_app::cli::parse(&args) {
        Some(Ok(command)) => std::process::exit(countersign_app::cli::run(command)),
        Some(Err(usage)) => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
        None => countersign_app::run(),
    }
}
