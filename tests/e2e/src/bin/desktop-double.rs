//! Stand-ins for the desktop's D-Bus services, for the end-to-end tests (Xvfb has neither):
//!
//! - `--notifications LOG`: a notification server (`org.freedesktop.Notifications`) that
//!   appends every `Notify` (and `{"closed": id}` for every `CloseNotification`) to LOG as a
//!   JSON line and, with `--click-after-ms N`, clicks each new notification N ms later (the
//!   `ActionInvoked "default"` signal a real click sends). It advertises `body-markup`.
//!   With `--hang`, it logs `{"hung": method}` for the first call and never answers it (nor,
//!   since that call holds the server, any other): a notification daemon that is stuck.
//! - `--tray LOG`: a tray host (`org.kde.StatusNotifierWatcher`) that appends every item that
//!   registers (`{"sender", "path"}`) to LOG.
//!
//! It prints `ready` on stdout once its names are owned, and runs until killed.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use zbus::message::Header;
use zbus::zvariant::OwnedValue;
use zbus::{Connection, interface};

const NOTIFICATIONS_PATH: &str = "/org/freedesktop/Notifications";

fn append(log: &PathBuf, line: serde_json::Value) {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("log file");
    // One write for the whole line, so a reader never sees half of it.
    file.write_all(format!("{line}\n").as_bytes())
        .expect("write log");
}

struct Notifications {
    log: PathBuf,
    next: u32,
    click_after: Option<Duration>,
    connection: Option<Connection>,
    hang: bool,
}

impl Notifications {
    async fn hang_if_asked(&self, method: &str) {
        if self.hang {
            append(&self.log, serde_json::json!({"hung": method}));
            std::future::pending::<()>().await;
        }
    }
}

#[interface(name = "org.freedesktop.Notifications")]
impl Notifications {
    #[allow(clippy::too_many_arguments)]
    async fn notify(
        &mut self,
        app_name: String,
        replaces_id: u32,
        _app_icon: String,
        summary: String,
        body: String,
        actions: Vec<String>,
        _hints: HashMap<String, OwnedValue>,
        _expire_timeout: i32,
    ) -> u32 {
        self.hang_if_asked("Notify").await;
        let id = if replaces_id != 0 {
            replaces_id
        } else {
            self.next += 1;
            self.next
        };
        append(
            &self.log,
            serde_json::json!({"id": id, "replaces": replaces_id, "app": app_name,
                "summary": summary, "body": body, "actions": actions}),
        );
        if let (Some(after), Some(connection), 0) =
            (self.click_after, self.connection.clone(), replaces_id)
        {
            // Interface methods run on zbus's own executor, not tokio's: a plain thread.
            std::thread::spawn(move || {
                std::thread::sleep(after);
                let _ = zbus::block_on(connection.emit_signal(
                    None::<()>,
                    NOTIFICATIONS_PATH,
                    "org.freedesktop.Notifications",
                    "ActionInvoked",
                    &(id, "default"),
                ));
            });
        }
        id
    }

    /// Like most daemons: bodies are markup, so a client must escape text.
    async fn get_capabilities(&self) -> Vec<String> {
        self.hang_if_asked("GetCapabilities").await;
        vec!["actions".into(), "body".into(), "body-markup".into()]
    }

    fn get_server_information(&self) -> (String, String, String, String) {
        (
            "desktop-double".into(),
            "countersign".into(),
            "1".into(),
            "1.2".into(),
        )
    }

    async fn close_notification(&self, id: u32) {
        append(&self.log, serde_json::json!({"closed": id}));
        if let Some(connection) = &self.connection {
            let _ = connection
                .emit_signal(
                    None::<()>,
                    NOTIFICATIONS_PATH,
                    "org.freedesktop.Notifications",
                    "NotificationClosed",
                    &(id, 3u32),
                )
                .await;
        }
    }
}

struct Watcher {
    log: PathBuf,
    items: Vec<String>,
}

#[interface(name = "org.kde.StatusNotifierWatcher")]
impl Watcher {
    fn register_status_notifier_item(
        &mut self,
        service: String,
        #[zbus(header)] header: Header<'_>,
    ) {
        let sender = header.sender().map(|s| s.to_string()).unwrap_or_default();
        // Items register either a bus name or an object path (then the sender is the name).
        let (name, path) = if service.starts_with('/') {
            (sender.clone(), service.clone())
        } else {
            (service.clone(), "/StatusNotifierItem".to_owned())
        };
        append(&self.log, serde_json::json!({"sender": name, "path": path}));
        self.items.push(format!("{name}{path}"));
    }

    fn register_status_notifier_host(&self, _service: String) {}

    #[zbus(property)]
    fn registered_status_notifier_items(&self) -> Vec<String> {
        self.items.clone()
    }

    #[zbus(property)]
    fn is_status_notifier_host_registered(&self) -> bool {
        true
    }

    #[zbus(property)]
    fn protocol_version(&self) -> i32 {
        0
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> zbus::Result<()> {
    let mut args = std::env::args().skip(1);
    let (mut notifications, mut tray, mut click_after) = (None, None, None);
    let mut hang = false;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--notifications" => notifications = args.next().map(PathBuf::from),
            "--tray" => tray = args.next().map(PathBuf::from),
            "--click-after-ms" => {
                click_after = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .map(Duration::from_millis)
            }
            "--hang" => hang = true,
            other => panic!("unknown argument {other}"),
        }
    }
    let mut builder = zbus::connection::Builder::session()?;
    if let Some(log) = &tray {
        builder = builder.name("org.kde.StatusNotifierWatcher")?.serve_at(
            "/StatusNotifierWatcher",
            Watcher {
                log: log.clone(),
                items: Vec::new(),
            },
        )?;
    }
    if let Some(log) = &notifications {
        builder = builder.name("org.freedesktop.Notifications")?.serve_at(
            NOTIFICATIONS_PATH,
            Notifications {
                log: log.clone(),
                next: 0,
                click_after,
                connection: None,
                hang,
            },
        )?;
    }
    let connection = builder.build().await?;
    if notifications.is_some() {
        let iface = connection
            .object_server()
            .interface::<_, Notifications>(NOTIFICATIONS_PATH)
            .await?;
        iface.get_mut().await.connection = Some(connection.clone());
    }
    println!("ready");
    std::future::pending::<()>().await;
    Ok(())
}
