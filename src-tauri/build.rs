fn main() {
    // tauri.conf.json lives at the top of the repository; paths in it are relative to there.
    tauri_build::try_build(tauri_build::Attributes::new().config_path("../tauri.conf.json"))
        .expect("tauri build configuration");
}
