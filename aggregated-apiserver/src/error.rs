//! The library's error, as an application meets it: what failed and why, as
//! a chain of causes (`{:#}` prints them in one line, `source()` walks them).
//! Inside the library errors carry their context as they go up; this type is
//! where they leave it.

use std::fmt;

/// What went wrong, with its causes.
///
/// `{}` shows the outermost message, `{:#}` the whole chain
/// (`serving greetings.example.com: invalid x-kubernetes-validations: ...`).
/// It converts into `anyhow::Error` with `?`, and from it, so an application
/// built on anyhow needs nothing more.
///
/// ```
/// let e = aggregated_apiserver::Error::msg("no cluster configured");
/// assert_eq!(format!("{e:#}"), "no cluster configured");
/// ```
pub struct Error(anyhow::Error);

/// A `Result` whose error is the library's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error that says `message`.
    pub fn msg(message: impl fmt::Display + fmt::Debug + Send + Sync + 'static) -> Self {
        Self(anyhow::Error::msg(message))
    }

    /// An error caused by `error`.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(anyhow::Error::new(error))
    }
}

impl From<anyhow::Error> for Error {
    fn from(error: anyhow::Error) -> Self {
        Self(error)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            write!(f, "{:#}", self.0)
        } else {
            write!(f, "{}", self.0)
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}
