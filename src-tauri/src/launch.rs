//! Start-up: command-line options, where the config and the audit log are, and the core.

use std::path::PathBuf;

use countersign_core::{App, AuditLog, config, dirs, private_fs, settings};

/// The option that starts the app in the tray.
pub const IN_TRAY: &str = "--in-tray";

#[derive(Debug, Default, Clone)]
pub struct Options {
    /// `--config PATH`: wins over `$COUNTERSIGN_CONFIG` and the platform config dir.
    pub config: Option<PathBuf>,
    /// `--in-tray` (how start at login launches it): no window until the person opens it,
    /// when a tray host shows the icon to open it from; without one the window opens as usual.
    pub in_tray: bool,
}

impl Options {
    pub fn from_args(args: impl Iterator<Item = String>) -> Self {
        let mut options = Options::default();
        let mut args = args.peekable();
        while let Some(arg) = args.next() {
            if let Some(path) = arg.strip_prefix("--config=") {
                options.config = Some(PathBuf::from(path));
            } else if arg == "--config" {
                options.config = args.next().map(PathBuf::from);
            } else if arg == IN_TRAY {
                options.in_tray = true;
            }
        }
        options
    }
}

/// Starts GTK with its GL off, unless the person set `GDK_GL` (even empty, which turns GPU
/// drawing back on). Why: GDK probes GL when it opens the display, which loads the GL driver
/// (Mesa's, 30 MiB with its LLVM) into a process that may wait all day in the tray, and with
/// GDK's GL off WebKit draws the page without GPU compositing, which takes its web process
/// from 188 to 108 MiB; a page of forms and lists needs no GPU (BENCHMARKS.md, memory).
/// Must run before the app starts threads of its own: the variable is set only for GTK's
/// start and removed again, so that nothing the app starts (servers, the browser, WebKit)
/// inherits it. Then this process's EGL is kept from loading a driver (`keep_egl_drivers_out`).
/// Returns whether it did (false when the person's setting stands).
#[cfg(target_os = "linux")]
pub fn start_gtk_without_gl() -> bool {
    const GDK_GL: &str = "GDK_GL";
    if std::env::var_os(GDK_GL).is_some() {
        return false;
    }
    // SAFETY: called first thing in `run`, before the runtime, Tauri or any plugin starts a
    // thread. The one thread already there is JavaScriptCore's memory scavenger, started as
    // its library loads (gdb), waiting on a timer; and glibc frees no array a reader could
    // hold here (this first set copies the environment to a new one, the unset shifts in it).
    unsafe { std::env::set_var(GDK_GL, "disable") };
    // GDK reads the variable once, here; Tauri's own start later finds GTK started. A failure
    // (no display) is left for Tauri's start to report, as before.
    let _ = gtk::init();
    unsafe { std::env::remove_var(GDK_GL) };
    keep_egl_drivers_out();
    true
}

/// Keeps the app's memory to itself, as ssh-agent and gpg-agent do: it holds tokens, OAuth
/// sign-ins and the answers the person typed, and a crash would otherwise write them to a core
/// file (Ubuntu's apport keeps one in `/var/crash`, and may upload it), and any process of the
/// user's could read them through `/proc/<pid>/mem` where ptrace is not restricted (Debian's
/// default). A non-dumpable process leaves no core, and only root may trace or read it. The
/// processes it starts are dumpable again (`execve` resets it).
#[cfg(target_os = "linux")]
pub fn keep_memory_private() {
    // SAFETY: prctl with PR_SET_DUMPABLE takes one integer and touches no memory of ours.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        eprintln!(
            "countersign: cannot keep its memory private: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// The descriptors the app asks for (within the hard limit): the gateway serves up to
/// `MAX_OPEN_CONNECTIONS` (1,024) connections, and the servers' pipes, the audit log and WebKit
/// need theirs beside; Linux's usual soft limit is 1,024 in all. Not more: the servers the app
/// starts inherit it, and some close every descriptor up to it as they start.
const OPEN_FILES: libc::rlim_t = 8192;

/// Raises the soft limit on open descriptors to [`OPEN_FILES`] (or the hard limit, if lower).
pub fn raise_open_files() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the one struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return;
        }
        let wanted = OPEN_FILES.min(limit.rlim_max);
        if limit.rlim_cur < wanted {
            limit.rlim_cur = wanted;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// Forgets an `APPIMAGE` (and `APPDIR`) this process only inherited: started from an AppImage
/// app's terminal, say, where it names that app. The autostart entry ("Start Countersign when
/// I log in") is written with `$APPIMAGE` as the program when it is set, so it would start that
/// other app at login instead of Countersign. Kept when this binary runs from an AppImage's
/// mount. Must run while the app has no thread of its own (see `start_gtk_without_gl`).
pub fn forget_inherited_appimage() {
    let exe = std::env::current_exe().unwrap_or_default();
    if inherited_appimage(&exe, std::env::var_os("APPIMAGE").as_deref()) {
        // SAFETY: called first thing in `run`, as `start_gtk_without_gl` is (see there).
        unsafe {
            std::env::remove_var("APPIMAGE");
            std::env::remove_var("APPDIR");
        }
    }
}

/// Whether `appimage` is set while `exe` does not run from an AppImage's mount
/// (`$TMPDIR/.mount_*`, where the AppImage runtime mounts the image it starts).
fn inherited_appimage(exe: &std::path::Path, appimage: Option<&std::ffi::OsStr>) -> bool {
    appimage.is_some()
        && !exe
            .components()
            .any(|c| c.as_os_str().to_string_lossy().starts_with(".mount_"))
}

/// Has this process's EGL find no driver, for good, while the processes it starts find theirs.
/// Why: making WebKit's web context opens an EGL display in the app's process, which loads the
/// GL driver (Mesa's, with its 26 MiB LLVM) and keeps it for the app's life, in the tray too,
/// though with GTK's GL off nothing here draws with it: the page is drawn in WebKit's web
/// process, which needs its EGL and gets it, since it starts with the environment as it was.
/// libglvnd's libEGL reads its list of drivers once per process, on first use: it is made to
/// read an empty list now, and the variable that says so is removed again at once. Left alone
/// when the person chose the drivers (either variable set), or when EGL is not libglvnd's.
/// Must run while the app has no thread of its own (see `start_gtk_without_gl`).
#[cfg(target_os = "linux")]
fn keep_egl_drivers_out() {
    const FILENAMES: &str = "__EGL_VENDOR_LIBRARY_FILENAMES";
    if std::env::var_os(FILENAMES).is_some()
        || std::env::var_os("__EGL_VENDOR_LIBRARY_DIRS").is_some()
    {
        return;
    }
    // libEGL is WebKit's dependency, so it is loaded by now; looked up rather than linked so
    // the binary needs nothing new.
    // SAFETY: dlsym with a NUL-terminated name; the symbol, when there, is EGL's
    // `const char *eglQueryString(EGLDisplay, EGLint)`.
    let query = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"eglQueryString".as_ptr()) };
    if query.is_null() {
        return;
    }
    type QueryString = unsafe extern "C" fn(*mut libc::c_void, i32) -> *const libc::c_char;
    const EGL_EXTENSIONS: i32 = 0x3055;
    // SAFETY: as in `start_gtk_without_gl`, no other thread of the app's exists yet. The query
    // on no display lists the drivers' client extensions, which is what makes libglvnd read
    // its list; with none, it returns null or an empty string, and reads nothing more.
    unsafe {
        std::env::set_var(FILENAMES, "");
        let query: QueryString = std::mem::transmute(query);
        query(std::ptr::null_mut(), EGL_EXTENSIONS);
        std::env::remove_var(FILENAMES);
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(
        "no home directory to keep files in; pass --config PATH or set {}",
        config::CONFIG_ENV
    )]
    NoHome,
    #[error(transparent)]
    Audit(#[from] countersign_core::ask::audit::AuditError),
    #[error("{0}")]
    NotYours(String),
    #[error("Countersign is already running for this user (it holds {0}); this one quits")]
    AlreadyRunning(String),
    #[error("cannot take {0}: {1}")]
    NoLock(String, std::io::Error),
}

/// Held for the app's life: see `private_fs::lock_exclusive`.
static INSTANCE_LOCK: std::sync::OnceLock<std::fs::File> = std::sync::OnceLock::new();

/// Only one Countersign on the person's files. The single-instance plugin hands a second launch
/// over to the first through the session bus; without one (or if that fails) this is what stops
/// the second before it reads or writes anything.
fn hold_instance_lock() -> Result<(), LaunchError> {
    let path = dirs::instance_lock_path().ok_or(LaunchError::NoHome)?;
    let shown = path.display().to_string();
    match private_fs::lock_exclusive(&path) {
        Ok(Some(file)) => {
            let _ = INSTANCE_LOCK.set(file);
            Ok(())
        }
        Ok(None) => Err(LaunchError::AlreadyRunning(shown)),
        Err(e) => Err(LaunchError::NoLock(shown, e)),
    }
}

/// `countersign-bridge` as agents should launch it: beside the app binary when it is there
/// (an installed package, a build), by name on PATH otherwise.
pub fn bridge_command() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join("countersign-bridge")))
        .filter(|p| p.exists())
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "countersign-bridge".into())
}

/// The demo server shipped beside the app binary; by name on PATH otherwise.
fn demo_server_command() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join("countersign-demo-server")))
        .filter(|p| p.exists())
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "countersign-demo-server".into())
}

pub async fn start_core(options: &Options) -> Result<App, LaunchError> {
    // Before anything is read or written: a directory of another user's is not used, and
    // what an older version left readable by others is made private once, and the person is
    // told.
    private_fs::refuse_foreign(&dirs::own_dirs(), private_fs::euid())
        .map_err(LaunchError::NotYours)?;
    // The lock that cannot be taken (a read-only or full disk) does not keep the person's
    // Countersign from starting; one held by another Countersign does.
    let unlocked = match hold_instance_lock() {
        Ok(()) => None,
        Err(e @ LaunchError::NoLock(..)) => Some(e),
        Err(e) => return Err(e),
    };
    let mut notices: Vec<String> = private_fs::tighten(&dirs::own_dirs())
        .iter()
        .map(|t| format!("Made private: {t}."))
        .collect();
    if let Some(e) = unlocked {
        tracing::warn!("{e}");
        notices.push(format!(
            "{e}: a second Countersign started on your files would not be stopped."
        ));
    }
    let source = config::locate(options.config.clone()).ok_or(LaunchError::NoHome)?;
    let loaded = config::load_or_create(&source, &demo_server_command());
    for error in &loaded.errors {
        tracing::warn!("{error}");
    }
    let audit_path = dirs::audit_log_path().ok_or(LaunchError::NoHome)?;
    let audit = AuditLog::open(audit_path)?;
    tracing::info!(config = %source.path().display(), audit = %audit.path().display(), servers = loaded.servers.len(), "starting");
    let (settings, warning) = settings::SettingsStore::load(dirs::settings_path());
    if let Some(warning) = warning {
        tracing::warn!("{warning}");
        notices.push(warning);
    }
    let token = dirs::gateway_token_path().ok_or(LaunchError::NoHome)?;
    // Sign-in tokens go to the desktop's secret store; without one, to memory (and the
    // server's page says so).
    let auth = countersign_core::mcp::oauth::Auth::new(
        countersign_core::mcp::oauth::vault::Vault::detect().await,
    );
    Ok(App::start_with_auth(loaded, audit, auth)
        .await
        .with_notices(notices)
        .with_settings(settings)
        .with_gateway(token, dirs::gateway_file())
        .await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_descriptor_limit_is_raised_within_the_hard_one() {
        let soft = || {
            let mut limit = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: as in `raise_open_files`.
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
            limit
        };
        // As a login session starts it (1,024 is usual; lower here, so the test shows a rise).
        let mut low = soft();
        low.rlim_cur = 256.min(low.rlim_max);
        // SAFETY: as in `raise_open_files`.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &low) }, 0);
        let before = soft();
        raise_open_files();
        let after = soft();
        assert_eq!(after.rlim_max, before.rlim_max);
        assert!(
            after.rlim_cur >= OPEN_FILES.min(after.rlim_max),
            "{}",
            after.rlim_cur
        );
    }

    /// Run in a process of its own (nextest runs each test so), as the app runs it at start.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_apps_memory_is_kept_from_other_processes() {
        // SAFETY: PR_GET_DUMPABLE takes no pointer.
        let dumpable = || unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) };
        assert_eq!(dumpable(), 1);
        keep_memory_private();
        assert_eq!(dumpable(), 0);
    }

    #[test]
    fn an_appimage_only_inherited_is_forgotten() {
        use std::ffi::OsStr;
        use std::path::Path;
        let other = Some(OsStr::new("/home/me/Apps/Editor.AppImage"));
        assert!(inherited_appimage(Path::new("/usr/bin/countersign"), other));
        assert!(!inherited_appimage(
            Path::new("/tmp/.mount_CountehX2b/usr/bin/countersign"),
            Some(OsStr::new("/home/me/Apps/Countersign.AppImage"))
        ));
        assert!(!inherited_appimage(Path::new("/usr/bin/countersign"), None));
    }

    fn options(args: &[&str]) -> Options {
        Options::from_args(args.iter().map(|a| a.to_string()))
    }

    #[test]
    fn in_tray_and_config_are_read_in_any_order() {
        let o = options(&[]);
        assert!(!o.in_tray && o.config.is_none());
        let o = options(&["--in-tray", "--config", "c.json"]);
        assert!(o.in_tray);
        assert_eq!(o.config, Some(PathBuf::from("c.json")));
        let o = options(&["--config=c.json", "--in-tray"]);
        assert!(o.in_tray);
        assert_eq!(o.config, Some(PathBuf::from("c.json")));
        // A config file named like the option is a config file.
        let o = options(&["--config", "--in-tray"]);
        assert!(!o.in_tray);
        assert_eq!(o.config, Some(PathBuf::from("--in-tray")));
    }
}
