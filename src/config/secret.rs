//! A value that must never reach a log line or an error message (credentials never
//! appear in logs): HMAC keys, collector credentials. Its `Debug` prints `<redacted>`, so a
//! `{:?}` of the configuration (or of any struct holding one) is safe to log; the value itself
//! is read only through [`Secret::expose`], which makes every use visible in review.

/// A redacting wrapper; compare with `==` (configuration reloads check whether a key changed).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret<T>(T);

impl<T> Secret<T> {
    pub fn new(value: T) -> Secret<T> {
        Secret(value)
    }

    /// The value, for the one place that needs it (signing, a request header).
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> std::fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests {
    use super::Secret;

    #[test]
    fn debug_output_never_shows_the_value() {
        let s = Secret::new(b"state-key-0123456789".to_vec());
        assert_eq!(format!("{s:?}"), "<redacted>");
        let nested = Some((
            String::from("x-api-key"),
            Secret::new(String::from("hunter2")),
        ));
        assert!(!format!("{nested:?}").contains("hunter2"));
        assert_eq!(s.expose(), b"state-key-0123456789");
    }
}
