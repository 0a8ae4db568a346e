//! Entry point of the webview (index.html loads this). Everything else is in app.ts.

import "./styles.css";
import { start } from "./app";

const root = document.getElementById("app");
if (root) void start(root);
