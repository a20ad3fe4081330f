//! Logging through libfabric's `fi_log`, so FI_LOG_LEVEL / FI_LOG_SUBSYS / FI_LOG_PROV apply.

use std::fmt;

#[derive(Clone, Copy, Debug)]
pub enum Level {
    Warn,
    Info,
    Debug,
}

#[derive(Clone, Copy, Debug)]
pub enum Subsys {
    Core,
    Fabric,
    Domain,
    Eq,
    Cntr,
    EpCtrl,
    EpData,
}

/// Writes one log line if libfabric has logging enabled for it. Before `fi_prov_ini` ran (in
/// cargo's own tests) there is no libfabric to log to and nothing is written.
pub fn log(level: Level, subsys: Subsys, func: &str, line: u32, msg: fmt::Arguments) {
    // The crate's unit tests run without libfabric (cargo gives them no run path to it), where
    // nothing would be written: they do not refer to it at all.
    #[cfg(not(test))]
    to_libfabric(level, subsys, func, line, msg);
    #[cfg(test)]
    let _ = (level, subsys, func, line, msg);
}

#[cfg(not(test))]
fn to_libfabric(level: Level, subsys: Subsys, func: &str, line: u32, msg: fmt::Arguments) {
    use super::provider;
    use crate::ofi;
    use std::ffi::CString;
    let Some(record) = provider::registered() else {
        return;
    };
    let level = match level {
        Level::Warn => ofi::fi_log_level_FI_LOG_WARN,
        Level::Info => ofi::fi_log_level_FI_LOG_INFO,
        Level::Debug => ofi::fi_log_level_FI_LOG_DEBUG,
    };
    let subsys = ofi_subsys(subsys);
    // SAFETY: `record` is the registered provider; fi_log_enabled only reads it.
    if unsafe { ofi::fi_log_enabled(record, level, subsys) } == 0 {
        return;
    }
    let text = CString::new(format!("{msg}\n").replace('\0', "\\0")).unwrap_or_default();
    let func = CString::new(func).unwrap_or_default();
    // SAFETY: "%s" consumes exactly the one NUL-terminated string passed.
    unsafe {
        ofi::fi_log(
            record,
            level,
            subsys,
            func.as_ptr(),
            line as i32,
            c"%s".as_ptr(),
            text.as_ptr(),
        )
    };
}

/// A warning about what the user set (a core, a parameter value): logged at warn like every
/// warning, and, where libfabric's log would not show it (its default level shows no warning),
/// written to stderr once per process for its call site, in the shape of libfabric's own lines,
/// so that a misspelt FI_RSCNTR_CORE is not just "fi_getinfo: -61". `said` is the call site's.
pub fn warn_user(
    said: &std::sync::atomic::AtomicBool,
    subsys: Subsys,
    func: &str,
    line: u32,
    msg: fmt::Arguments,
) {
    #[cfg(not(test))]
    if !warn_shown(subsys) {
        if !said.swap(true, std::sync::atomic::Ordering::Relaxed) {
            eprintln!(
                "libfabric:{}:rscntr:{}:{func}():{line}<warn> {msg} (said once; FI_LOG_LEVEL=warn logs every warning)",
                std::process::id(),
                subsys_name(subsys),
            );
        }
        return;
    }
    #[cfg(test)]
    let _ = said;
    log(Level::Warn, subsys, func, line, msg);
}

/// Whether libfabric's log shows a warning of `subsys` from rscntr.
#[cfg(not(test))]
fn warn_shown(subsys: Subsys) -> bool {
    let Some(record) = super::provider::registered() else {
        return false;
    };
    // SAFETY: `record` is the registered provider; fi_log_enabled only reads it.
    unsafe {
        crate::ofi::fi_log_enabled(
            record,
            crate::ofi::fi_log_level_FI_LOG_WARN,
            ofi_subsys(subsys),
        ) != 0
    }
}

/// The subsystem as libfabric prints it.
#[cfg(not(test))]
fn subsys_name(subsys: Subsys) -> &'static str {
    match subsys {
        Subsys::Core => "core",
        Subsys::Fabric => "fabric",
        Subsys::Domain => "domain",
        Subsys::Eq => "eq",
        Subsys::Cntr => "cntr",
        Subsys::EpCtrl => "ep_ctrl",
        Subsys::EpData => "ep_data",
    }
}

#[cfg(not(test))]
fn ofi_subsys(subsys: Subsys) -> crate::ofi::fi_log_subsys {
    use crate::ofi;
    match subsys {
        Subsys::Core => ofi::fi_log_subsys_FI_LOG_CORE,
        Subsys::Fabric => ofi::fi_log_subsys_FI_LOG_FABRIC,
        Subsys::Domain => ofi::fi_log_subsys_FI_LOG_DOMAIN,
        Subsys::Eq => ofi::fi_log_subsys_FI_LOG_EQ,
        Subsys::Cntr => ofi::fi_log_subsys_FI_LOG_CNTR,
        Subsys::EpCtrl => ofi::fi_log_subsys_FI_LOG_EP_CTRL,
        Subsys::EpData => ofi::fi_log_subsys_FI_LOG_EP_DATA,
    }
}

/// The name of the enclosing function, for log lines (libfabric prints `func():line`).
#[macro_export]
macro_rules! function_name {
    () => {{
        fn f() {}
        fn type_name_of<T>(_: T) -> &'static str {
            ::std::any::type_name::<T>()
        }
        let name = type_name_of(f);
        let name = &name[..name.len() - 3];
        name.rsplit("::")
            .find(|s| *s != "{{closure}}")
            .unwrap_or(name)
    }};
}

#[macro_export]
macro_rules! fi_warn {
    ($subsys:ident, $($arg:tt)*) => {
        $crate::boundary::log::log($crate::boundary::log::Level::Warn, $crate::boundary::log::Subsys::$subsys,
            $crate::function_name!(), line!(), format_args!($($arg)*))
    };
}

/// [`warn_user`] at the call site: a warning about what the user set, seen even at libfabric's
/// default log level, once per process.
#[macro_export]
macro_rules! fi_warn_user {
    ($subsys:ident, $($arg:tt)*) => {{
        static SAID: ::std::sync::atomic::AtomicBool = ::std::sync::atomic::AtomicBool::new(false);
        $crate::boundary::log::warn_user(&SAID, $crate::boundary::log::Subsys::$subsys,
            $crate::function_name!(), line!(), format_args!($($arg)*))
    }};
}

#[macro_export]
macro_rules! fi_info {
    ($subsys:ident, $($arg:tt)*) => {
        $crate::boundary::log::log($crate::boundary::log::Level::Info, $crate::boundary::log::Subsys::$subsys,
            $crate::function_name!(), line!(), format_args!($($arg)*))
    };
}

#[macro_export]
macro_rules! fi_dbg {
    ($subsys:ident, $($arg:tt)*) => {
        $crate::boundary::log::log($crate::boundary::log::Level::Debug, $crate::boundary::log::Subsys::$subsys,
            $crate::function_name!(), line!(), format_args!($($arg)*))
    };
}
