//! `close-window TITLE`: asks every X window titled TITLE to close the way a window manager's
//! close button does (a `WM_DELETE_WINDOW` client message), for the end-to-end tests, which
//! run under Xvfb with no window manager. Prints how many windows it asked.

use std::ffi::{CStr, CString};
use std::os::raw::{c_long, c_uint};

use x11_dl::xlib;

fn main() {
    let title = std::env::args().nth(1).expect("usage: close-window TITLE");
    let xlib = xlib::Xlib::open().expect("libX11 loads");
    // SAFETY: plain Xlib calls on a display this function opens and closes; every pointer
    // Xlib returns is checked and freed with XFree.
    let asked = unsafe {
        let display = (xlib.XOpenDisplay)(std::ptr::null());
        assert!(!display.is_null(), "cannot open the X display ($DISPLAY)");
        let protocols_name = CString::new("WM_PROTOCOLS").unwrap();
        let delete_name = CString::new("WM_DELETE_WINDOW").unwrap();
        let protocols = (xlib.XInternAtom)(display, protocols_name.as_ptr(), 0);
        let delete = (xlib.XInternAtom)(display, delete_name.as_ptr(), 0);
        let mut windows = Vec::new();
        find(
            &xlib,
            display,
            (xlib.XDefaultRootWindow)(display),
            &title,
            &mut windows,
        );
        for &window in &windows {
            let mut data = xlib::ClientMessageData::new();
            data.set_long(0, delete as c_long);
            data.set_long(1, xlib::CurrentTime as c_long);
            let mut event = xlib::XEvent {
                client_message: xlib::XClientMessageEvent {
                    type_: xlib::ClientMessage,
                    serial: 0,
                    send_event: 1,
                    display,
                    window,
                    message_type: protocols,
                    format: 32,
                    data,
                },
            };
            (xlib.XSendEvent)(display, window, 0, xlib::NoEventMask, &mut event);
        }
        (xlib.XFlush)(display);
        (xlib.XCloseDisplay)(display);
        windows.len()
    };
    println!("{asked}");
}

unsafe fn find(
    xlib: &xlib::Xlib,
    display: *mut xlib::Display,
    window: xlib::Window,
    title: &str,
    found: &mut Vec<xlib::Window>,
) {
    unsafe {
        let mut name = std::ptr::null_mut();
        if (xlib.XFetchName)(display, window, &mut name) != 0 && !name.is_null() {
            if CStr::from_ptr(name).to_string_lossy() == title {
                found.push(window);
            }
            (xlib.XFree)(name.cast());
        }
        let (mut root, mut parent, mut children, mut count) =
            (0, 0, std::ptr::null_mut(), 0 as c_uint);
        if (xlib.XQueryTree)(
            display,
            window,
            &mut root,
            &mut parent,
            &mut children,
            &mut count,
        ) != 0
            && !children.is_null()
        {
            for i in 0..count as usize {
                find(xlib, display, *children.add(i), title, found);
            }
            (xlib.XFree)(children.cast());
        }
    }
}
