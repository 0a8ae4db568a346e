//! Test entry: the IPC mock first (module order is evaluation order), then the real app.
import "./mock-ipc";
import "../../src/main";
