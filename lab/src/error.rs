//! One boxed error type for the whole crate, plus `context` to say what was
//! being done when a lower-level error happened. Callers that must branch on
//! a failure get a `bool` or an `Option` from the API instead (a refused
//! acquire is not an error).

use std::fmt;

/// Any error, with its chain of sources.
pub type Error = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error that says what was being attempted, wrapping the cause.
#[derive(Debug)]
pub struct Context {
    /// What the code was doing, in the reader's terms.
    what: String,
    /// The lower-level failure.
    cause: Error,
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what)
    }
}

impl std::error::Error for Context {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.cause.as_ref())
    }
}

/// Adds a description of the attempted work to any error.
pub trait ResultExt<T> {
    /// Wraps the error, if any, with `what`.
    fn context(self, what: impl Into<String>) -> Result<T>;
    /// Like `context`, for a message that is costly to build.
    fn with_context(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: Into<Error>> ResultExt<T> for std::result::Result<T, E> {
    fn context(self, what: impl Into<String>) -> Result<T> {
        self.map_err(|e| Box::new(Context { what: what.into(), cause: e.into() }) as Error)
    }
    fn with_context(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Box::new(Context { what: what(), cause: e.into() }) as Error)
    }
}

/// The error and all its sources, one per line, as the binaries print it.
pub fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        // The postgres crate repeats the cause in its own Display; skip echoes.
        if !out.ends_with(&text) {
            out.push_str("\n  caused by: ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

/// What a panicking thread said (its `panic!` message), for the error that
/// reports the panic: a panic in a thread is a failure, never a silence.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with no message".into())
}

#[cfg(test)]
mod tests {
    use super::panic_message;

    /// The message of a panic, whether it was a literal or formatted.
    #[test]
    fn a_panic_says_what_it_said() {
        let literal = std::thread::spawn(|| panic!("boom")).join().unwrap_err();
        let formatted = std::thread::spawn(|| panic!("token {}", 2)).join().unwrap_err();
        assert_eq!((panic_message(&*literal), panic_message(&*formatted)), ("boom".to_owned(), "token 2".to_owned()));
    }
}
