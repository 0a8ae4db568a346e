//! The test that every file the app creates is private: it runs every part that writes one,
//! so it lives beside the facade that holds them all rather than in `private_fs`.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use crate::private_fs::tests::{Scratch, umask_022};
use crate::private_fs::{DIR_MODE, FILE_MODE, mode};

/// Every file the app creates, where the app creates it (config dir, data dir, an agent's
/// config), under umask 022: Countersign's own files 0600 in 0700 directories; the agent's
/// file keeps the mode it had.
#[tokio::test]
async fn every_file_the_app_creates_is_private_under_umask_022() {
    use crate::agents::{ClientKind, Clients, Places, Route};
    umask_022();
    let s = Scratch::new("app-files");
    let home = s.0.join("home");
    let config_dir = home.join(".config/countersign");
    let data_dir = home.join(".local/share/countersign");
    let config_path = config_dir.join("config.json");

    // First run: the demo config.
    let loaded = crate::config::load_or_create(
        &crate::config::ConfigSource::Platform(config_path.clone()),
        "countersign-demo-server",
    );
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    // The audit log, rotated once so a rotated file exists too.
    let audit = crate::ask::audit::AuditLog::open_rotating(
        data_dir.join("audit.jsonl"),
        crate::ask::audit::Rotation {
            file_bytes: 100,
            keep: 2,
        },
    )
    .unwrap();
    audit
        .record_refused("desk", "a test", &serde_json::json!({}))
        .unwrap();
    audit
        .record_refused("desk", "a test", &serde_json::json!({}))
        .unwrap();
    // Settings, the gateway's token and its address for the bridge.
    let (settings, _) =
        crate::settings::SettingsStore::load(Some(config_dir.join("settings.json")));
    settings
        .update(|s| {
            s.muted_servers.insert("demo".into());
        })
        .unwrap();
    let token_path = data_dir.join("gateway-token");
    let gateway = crate::gateway::Gateway::new(
        crate::config::GatewayConfig {
            enabled: true,
            port: 0,
        },
        Vec::new(),
        crate::ask::broker::Broker::new(audit.clone()),
        settings,
        token_path,
    )
    .unwrap();
    gateway.listen().await.unwrap();
    gateway
        .write_discovery(&data_dir.join("gateway.json"))
        .unwrap();
    gateway.shutdown().await;
    // An agent's config (0644, as editors leave it): imported (our config backed up and
    // rewritten), then routed through the gateway (the agent's file backed up, recorded).
    let clients = Clients::new(
        Places::under_home(&home),
        config_path.clone(),
        Some(data_dir.join("rewrites.json")),
        47717,
    );
    let agent_file = home.join(".cursor/mcp.json");
    std::fs::create_dir_all(agent_file.parent().unwrap()).unwrap();
    std::fs::write(
        &agent_file,
        r#"{"mcpServers": {"files": {"command": "files-mcp", "env": {"API_KEY": "k"}}}}"#,
    )
    .unwrap();
    std::fs::set_permissions(&agent_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let preview = clients.preview_import(ClientKind::Cursor).unwrap();
    clients.import(preview.plan, &["files".into()]).unwrap();
    let route = Route {
        base_url: "http://127.0.0.1:47717".into(),
        token: "TOKEN".into(),
        bridge: "countersign-bridge".into(),
        served: vec!["files".into()],
    };
    let preview = clients.preview_rewrite(ClientKind::Cursor, &route).unwrap();
    clients.rewrite(preview.plan.expect("a rewrite")).unwrap();

    let mut ours = Vec::new();
    for dir in [&config_dir, &data_dir] {
        assert_eq!(mode(dir).unwrap(), DIR_MODE, "{}", dir.display());
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            assert_eq!(mode(&path).unwrap(), FILE_MODE, "{}", path.display());
            ours.push(path.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    ours.sort();
    let expected = [
        "agents.json",
        "audit.jsonl",
        "audit.jsonl.1",
        "config.json",
        "config.json.bak-",
        "gateway-token",
        "gateway.json",
        "rewrites.json",
        "settings.json",
    ];
    assert_eq!(ours.len(), expected.len(), "{ours:?}");
    for (name, want) in ours.iter().zip(expected) {
        assert!(name.starts_with(want), "{ours:?}");
    }
    // The agent's file now holds its token: readable by the user only (Undo puts 0644 back);
    // our backup of it is ours.
    assert_eq!(mode(&agent_file).unwrap(), 0o600);
    let backups: Vec<PathBuf> = std::fs::read_dir(agent_file.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".countersign-backup-"))
        .collect();
    assert_eq!(backups.len(), 1, "{backups:?}");
    assert_eq!(mode(&backups[0]).unwrap(), FILE_MODE);
}
