//! `countersign audit verify PATH`, run as the built binary: 0 and "intact" for an untouched
//! log; 1 and the first bad record's line for an edited one; 2 for a log that is not there.

use std::process::Command;

use countersign_core::AuditLog;

#[test]
fn audit_verify_reports_the_first_bad_line_and_exits_by_it() {
    let dir = std::env::temp_dir().join(format!("cs-cli-verify-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("audit.jsonl");
    let log = AuditLog::open(&path).unwrap();
    for n in 0..4 {
        log.record_refused("desk", &format!("test {n}"), &serde_json::json!({}))
            .unwrap();
    }
    let verify = || {
        Command::new(env!("CARGO_BIN_EXE_countersign"))
            .args(["audit", "verify"])
            .arg(&path)
            .output()
            .unwrap()
    };

    let out = verify();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("intact: 4 records"), "{stdout}");

    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replacen("test 1", "test X", 1)).unwrap();
    let out = verify();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!("broken: {}:2: line 2 was changed", path.display())),
        "{stdout}"
    );

    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(verify().status.code(), Some(2));
}
