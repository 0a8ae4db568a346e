//! Sign-in tokens in a real Secret Service: GNOME Keyring, started for this test on a session
//! bus of its own (a private `dbus-daemon`), with its keyrings in a fresh home. The tokens are
//! found in the keyring through the Secret Service API, and nowhere on disk in plain text
//! (GNOME Keyring encrypts its files). One test in this file: it points this process at the
//! test's bus, which no other test may share.

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use countersign_core::mcp::oauth::vault::{Vault, VaultKind, VaultStore};
use rmcp::transport::auth::{CredentialStore, StoredCredentials};

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn program(name: &str) -> &str {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "`{name}` is not installed: run `make deps` (scripts/install-deps.sh installs gnome-keyring)"
    );
    name
}

fn files_containing(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_containing(&path, needle));
        } else if let Ok(bytes) = std::fs::read(&path)
            && bytes.windows(needle.len()).any(|w| w == needle)
        {
            found.push(path.display().to_string());
        }
    }
    found
}

/// A session bus of its own and GNOME Keyring on it, keyrings in `home`; the bus's address
/// once the keyring answers as a Secret Service with a default collection, or why not (the
/// daemon's own words).
async fn keyring_up(home: &Path) -> Result<(Killed, Killed, String), String> {
    let runtime = home.join("run");
    std::fs::create_dir_all(&runtime).unwrap();
    std::fs::set_permissions(
        &runtime,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();

    let mut bus = Command::new(program("dbus-daemon"))
        .args(["--session", "--nofork", "--print-address=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start a session bus");
    let mut address = String::new();
    std::io::BufReader::new(bus.stdout.take().unwrap())
        .read_line(&mut address)
        .unwrap();
    let bus = Killed(bus);
    let address = address.trim().to_owned();
    assert!(!address.is_empty(), "the bus printed no address");

    let said = home.join("keyring.log");
    let mut keyring = Command::new(program("gnome-keyring-daemon"))
        .args(["--foreground", "--unlock", "--components=secrets"])
        .env("DBUS_SESSION_BUS_ADDRESS", &address)
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_RUNTIME_DIR", &runtime)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&said).unwrap())
        .spawn()
        .expect("start gnome-keyring-daemon");
    // The login keyring's password, then end of input.
    keyring
        .stdin
        .take()
        .unwrap()
        .write_all(b"test-password")
        .unwrap();
    let keyring = Killed(keyring);

    // This test's process talks to the test's bus (this file holds no other test).
    unsafe { std::env::set_var("DBUS_SESSION_BUS_ADDRESS", &address) };
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while std::time::Instant::now() < deadline {
        if Vault::detect().await.kind() == VaultKind::SecretService {
            return Ok((bus, keyring, address));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(std::fs::read_to_string(&said).unwrap_or_default())
}

#[tokio::test]
async fn tokens_live_in_the_secret_service_and_nowhere_on_disk() {
    let home = std::env::temp_dir().join(format!("cs-secret-service-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    // The keyring is the test's ground, not what it tests: one that does not come up (it
    // failed so twice in full test runs, never alone) is started again, afresh, twice
    // at most; what it said each time is in the failure.
    let mut said = Vec::new();
    let mut up = None;
    for attempt in 0..3 {
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(&home).unwrap();
        match keyring_up(&home).await {
            Ok(running) => {
                up = Some(running);
                break;
            }
            Err(why) => said.push(format!("attempt {attempt}: {why}")),
        }
    }
    let Some((_bus, _keyring, _address)) = up else {
        panic!("the keyring never answered: {said:?}");
    };
    let vault = Vault::detect().await;
    assert_eq!(
        vault.kind(),
        VaultKind::SecretService,
        "the keyring answers"
    );

    let token_response: rmcp::transport::auth::OAuthTokenResponse =
        serde_json::from_value(serde_json::json!({
            "access_token": "at-secret-service-test-4242",
            "token_type": "bearer",
            "expires_in": 3600,
            "refresh_token": "rt-secret-service-test-4242",
        }))
        .unwrap();
    let store = VaultStore::new(
        vault.clone(),
        "notes\nhttps://notes.example/mcp".into(),
        "notes",
    );
    store
        .save(StoredCredentials::new(
            "client-1".into(),
            Some(token_response),
            vec!["notes:read".into()],
            Some(1),
        ))
        .await
        .unwrap();

    // A second store (as after a restart) finds the sign-in in the keyring.
    let again = VaultStore::new(
        vault.clone(),
        "notes\nhttps://notes.example/mcp".into(),
        "notes",
    );
    let loaded = again.load().await.unwrap().expect("the sign-in is kept");
    assert_eq!(loaded.client_id, "client-1");
    let raw = vault
        .get("notes\nhttps://notes.example/mcp")
        .await
        .unwrap()
        .unwrap();
    assert!(raw.contains("at-secret-service-test-4242"));
    // Another address of the same name gets nothing.
    let other = VaultStore::new(
        vault.clone(),
        "notes\nhttps://evil.example/mcp".into(),
        "notes",
    );
    assert!(other.load().await.unwrap().is_none());

    // Nowhere on disk in plain text: not in the keyring's files, not anywhere in the home.
    for needle in ["at-secret-service-test-4242", "rt-secret-service-test-4242"] {
        let found = files_containing(&home, needle.as_bytes());
        assert!(found.is_empty(), "{needle} in {found:?}");
    }

    // Sign-out empties the keyring entry.
    again.clear().await.unwrap();
    let fresh = VaultStore::new(
        vault.clone(),
        "notes\nhttps://notes.example/mcp".into(),
        "notes",
    );
    assert!(fresh.load().await.unwrap().is_none());
    let _ = std::fs::remove_dir_all(&home);
}
