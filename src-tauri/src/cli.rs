//! Subcommands of the app binary, handled before the desktop starts:
//! `countersign audit verify [PATH]` checks the audit log's hash chain (the logic is the
//! core's; this reads argv and prints).

use std::path::PathBuf;

use countersign_core::ask::audit;
use countersign_core::dirs;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Check the log at the path, or the app's own log.
    AuditVerify(Option<PathBuf>),
}

const USAGE: &str = "usage: countersign audit verify [PATH]";

/// The subcommand `args` (without the program name) asks for; `None` starts the app as usual
/// (its own options, such as `--config`, are read by `launch::Options`).
pub fn parse(args: &[String]) -> Option<Result<Command, String>> {
    if args.first().map(String::as_str) != Some("audit") {
        return None;
    }
    Some(match &args[1..] {
        [verify] if verify == "verify" => Ok(Command::AuditVerify(None)),
        [verify, path] if verify == "verify" && !path.starts_with('-') => {
            Ok(Command::AuditVerify(Some(PathBuf::from(path))))
        }
        _ => Err(USAGE.to_owned()),
    })
}

/// Runs `command`, printing its result; the process's exit code: 0 when the log is intact,
/// 1 when a record was changed, removed or moved (the first one is printed), 2 when the log
/// cannot be read.
pub fn run(command: Command) -> i32 {
    match command {
        Command::AuditVerify(path) => {
            let Some(path) = path.or_else(dirs::audit_log_path) else {
                eprintln!("countersign: no home directory; name the log: {USAGE}");
                return 2;
            };
            match audit::verify_file(&path) {
                Ok(verification) => {
                    println!("{}: {verification}", path.display());
                    if verification.intact() { 0 } else { 1 }
                }
                Err(e) => {
                    eprintln!("countersign: {e}");
                    2
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn audit_verify_is_a_subcommand_and_anything_else_starts_the_app() {
        assert_eq!(parse(&args(&[])), None);
        assert_eq!(parse(&args(&["--config", "x.json"])), None);
        assert_eq!(
            parse(&args(&["audit", "verify"])),
            Some(Ok(Command::AuditVerify(None)))
        );
        assert_eq!(
            parse(&args(&["audit", "verify", "/tmp/a.jsonl"])),
            Some(Ok(Command::AuditVerify(Some("/tmp/a.jsonl".into()))))
        );
        assert_eq!(parse(&args(&["audit"])), Some(Err(USAGE.into())));
        assert_eq!(
            parse(&args(&["audit", "verify", "a", "b"])),
            Some(Err(USAGE.into()))
        );
    }
}
