//! Structured logging into the call's receipt.
//!
//! Each call goes to the host's `hane:operation/log` import, which records the
//! message with the call and caps the total bytes an operation may log; past
//! the cap messages are dropped, so log what helps explain a result, not every
//! step. Outside a component (unit tests on the host target) messages go to
//! standard error instead.

use crate::wit::hane::operation::log::Level;

/// Logs a message at trace level.
pub fn trace(message: &str) {
    emit(Level::Trace, message);
}

/// Logs a message at debug level.
pub fn debug(message: &str) {
    emit(Level::Debug, message);
}

/// Logs a message at info level.
pub fn info(message: &str) {
    emit(Level::Info, message);
}

/// Logs a message at warn level.
pub fn warn(message: &str) {
    emit(Level::Warn, message);
}

/// Logs a message at error level.
pub fn error(message: &str) {
    emit(Level::Error, message);
}

#[cfg(target_arch = "wasm32")]
fn emit(level: Level, message: &str) {
    crate::wit::hane::operation::log::log(level, message);
}

// The generated import is an `unreachable!()` stub off wasm32.
#[cfg(not(target_arch = "wasm32"))]
fn emit(level: Level, message: &str) {
    let level = match level {
        Level::Trace => "trace",
        Level::Debug => "debug",
        Level::Info => "info",
        Level::Warn => "warn",
        Level::Error => "error",
    };
    eprintln!("{level}: {message}");
}

#[cfg(test)]
mod tests {
    #[test]
    fn logging_off_wasm_does_not_panic() {
        super::trace("t");
        super::debug("d");
        super::info("i");
        super::warn("w");
        super::error("e");
    }
}
