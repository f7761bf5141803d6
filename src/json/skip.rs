//! The skip reader: a serde `Deserialize` that reads any JSON value and keeps nothing.

/// Any JSON value, parsed and checked exactly as `Value` would be (strings are decoded, so a
/// lone surrogate escape is refused; numbers are read the same way) but kept nowhere, so
/// nothing is allocated for it: what the envelope's serde path (src/mcp/envelope/read.rs)
/// passes over.
pub(crate) struct Skip;

struct SkipV;

impl<'de> serde::de::Visitor<'de> for SkipV {
    type Value = Skip;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_str<E>(self, _: &str) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_unit<E>(self) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut s: A) -> Result<Skip, A::Error> {
        while s.next_element::<Skip>()?.is_some() {}
        Ok(Skip)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Skip, A::Error> {
        while m.next_entry::<Skip, Skip>()?.is_some() {}
        Ok(Skip)
    }
}

impl<'de> serde::Deserialize<'de> for Skip {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SkipV)
    }
}
