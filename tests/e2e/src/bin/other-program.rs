//! `other-program`: a small window of another program that takes the X keyboard focus, as the
//! person switching to another program does, for the end-to-end tests and `make memory`, which
//! run under Xvfb with no window manager. Prints `focused` once it has the focus, then keeps
//! the window until its standard input closes. Gives up (exit 1) if the X server has not
//! mapped and focused it within 10 s.

use std::io::Read;
use std::time::{Duration, Instant};

use x11_dl::xlib;

const GIVE_UP_AFTER: Duration = Duration::from_secs(10);

fn main() {
    let xlib = xlib::Xlib::open().expect("libX11 loads");
    let deadline = Instant::now() + GIVE_UP_AFTER;
    // SAFETY: plain Xlib calls on a display this function opens (the X server closes it when
    // the process ends); the event is a plain struct Xlib fills in.
    unsafe {
        let display = (xlib.XOpenDisplay)(std::ptr::null());
        assert!(!display.is_null(), "cannot open the X display ($DISPLAY)");
        let screen = (xlib.XDefaultScreen)(display);
        let root = (xlib.XRootWindow)(display, screen);
        // In a corner, out of the way of the app's window.
        let width = (xlib.XDisplayWidth)(display, screen).max(64);
        let height = (xlib.XDisplayHeight)(display, screen).max(64);
        let window = (xlib.XCreateSimpleWindow)(
            display,
            root,
            width - 64,
            height - 64,
            64,
            64,
            0,
            0,
            (xlib.XWhitePixel)(display, screen),
        );
        (xlib.XSelectInput)(
            display,
            window,
            xlib::StructureNotifyMask | xlib::FocusChangeMask,
        );
        (xlib.XMapRaised)(display, window);
        (xlib.XFlush)(display);
        // Focus can be given only to a window that is viewable.
        wait_for(&xlib, display, xlib::MapNotify, deadline);
        (xlib.XSetInputFocus)(display, window, xlib::RevertToParent, xlib::CurrentTime);
        (xlib.XFlush)(display);
        wait_for(&xlib, display, xlib::FocusIn, deadline);
    }
    println!("focused");
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}

/// Reads events until one of `kind`; exits the process with 1 once `deadline` passes.
unsafe fn wait_for(xlib: &xlib::Xlib, display: *mut xlib::Display, kind: i32, deadline: Instant) {
    unsafe {
        let mut event: xlib::XEvent = std::mem::zeroed();
        loop {
            while (xlib.XPending)(display) > 0 {
                (xlib.XNextEvent)(display, &mut event);
                if event.get_type() == kind {
                    return;
                }
            }
            if Instant::now() > deadline {
                eprintln!("other-program: no X event {kind} within {GIVE_UP_AFTER:?}");
                std::process::exit(1);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
