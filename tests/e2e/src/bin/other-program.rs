//! `other-program`: a small window of another program that takes the X keyboard focus, as the
//! person switching to another program does, for the end-to-end tests and `make memory`, which
//! run under Xvfb with no window manager. Prints `focused` once it has the focus, then keeps
//! the window until its standard input closes.

use std::io::Read;

use x11_dl::xlib;

fn main() {
    let xlib = xlib::Xlib::open().expect("libX11 loads");
    // SAFETY: plain Xlib calls on a display this function opens and closes; the event is a
    // plain struct Xlib fills in.
    unsafe {
        let display = (xlib.XOpenDisplay)(std::ptr::null());
        assert!(!display.is_null(), "cannot open the X display ($DISPLAY)");
        let screen = (xlib.XDefaultScreen)(display);
        let root = (xlib.XRootWindow)(display, screen);
        // In a corner, out of the way of the app's window.
        let width = (xlib.XDisplayWidth)(display, screen) as u32;
        let height = (xlib.XDisplayHeight)(display, screen) as u32;
        let window = (xlib.XCreateSimpleWindow)(
            display,
            root,
            (width - 64) as i32,
            (height - 64) as i32,
            64,
            64,
            0,
            0,
            (xlib.XWhitePixel)(display, screen),
        );
        (xlib.XSelectInput)(display, window, xlib::StructureNotifyMask | xlib::FocusChangeMask);
        (xlib.XMapRaised)(display, window);
        let mut event: xlib::XEvent = std::mem::zeroed();
        // Focus can be given only to a window that is viewable.
        loop {
            (xlib.XNextEvent)(display, &mut event);
            if event.get_type() == xlib::MapNotify {
                break;
            }
        }
        (xlib.XSetInputFocus)(display, window, xlib::RevertToParent, xlib::CurrentTime);
        loop {
            (xlib.XNextEvent)(display, &mut event);
            if event.get_type() == xlib::FocusIn {
                break;
            }
        }
        println!("focused");
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        (xlib.XCloseDisplay)(display);
    }
}
