// Two builds from one config:
// - `vite build`: the app Tauri embeds (ui/dist, relative paths so it loads from tauri://).
// - `vite build --mode harness`: the same app behind a test entry that installs Tauri's
//   mockIPC first (ui/test-dist); only the Chromium tests load it, it never ships.
import { defineConfig } from "vite";

export default defineConfig(({ mode }) => {
  const harness = mode === "harness";
  return {
    base: "./",
    clearScreen: false,
    build: {
      outDir: harness ? "test-dist" : "dist",
      emptyOutDir: true,
      sourcemap: harness,
      rolldownOptions: {
        input: harness ? { harness: "tests/harness/index.html" } : { index: "index.html" },
      },
    },
  };
});
