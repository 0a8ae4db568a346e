//! A JSON object read only at its top level, and written again with a few members changed:
//! every other member goes on as the bytes it came in.

use std::borrow::Cow;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// An object's members in the order written, each value as the bytes it was written in.
pub(super) struct Members<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

/// What changes at the top level of an object.
#[derive(Default)]
pub(super) struct Edits {
    pub(super) drop: Vec<&'static str>,
    pub(super) replace: Vec<(&'static str, Box<RawValue>)>,
    pub(super) add: Vec<(&'static str, Value)>,
}

impl Edits {
    pub(super) fn is_empty(&self) -> bool {
        self.drop.is_empty() && self.replace.is_empty() && self.add.is_empty()
    }
}

impl<'a> Members<'a> {
    /// `None` unless `text` is one object whose keys are all distinct (a reader of repeated
    /// keys keeps the last; such an object is left to a whole reading, which does too).
    pub(super) fn read(text: &'a str) -> Option<Self> {
        let members = serde_json::from_str::<Members>(text).ok()?;
        let mut keys: Vec<&str> = members.0.iter().map(|(k, _)| k.as_ref()).collect();
        keys.sort_unstable();
        let distinct = keys.windows(2).all(|w| w[0] != w[1]);
        distinct.then_some(members)
    }

    pub(super) fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// The object again with `edits` made. Serialized rather than assembled as text, so the
    /// result is known to be JSON without being read once more.
    pub(super) fn write(&self, edits: &Edits) -> Option<Box<RawValue>> {
        serde_json::value::to_raw_value(&Edited {
            members: self,
            edits,
        })
        .ok()
    }
}

struct Edited<'m, 'a> {
    members: &'m Members<'a>,
    edits: &'m Edits,
}

impl Serialize for Edited<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        for (key, value) in &self.members.0 {
            if self.edits.drop.contains(&key.as_ref()) {
                continue;
            }
            match self
                .edits
                .replace
                .iter()
                .find(|(replaced, _)| replaced == key)
            {
                Some((_, new)) => map.serialize_entry(key, &**new)?,
                None => map.serialize_entry(key, value)?,
            }
        }
        for (key, value) in &self.edits.add {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for Visit<'a> {
            type Value = Members<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                let mut members = Vec::new();
                while let Some((Key(key), value)) = map.next_entry::<Key, &'a RawValue>()? {
                    members.push((key, value));
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(Visit(std::marker::PhantomData))
    }
}

/// A key, borrowed unless it was written with escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Key<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for Visit<'a> {
            type Value = Key<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(Visit(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_read_in_order_with_escaped_keys_and_refused_when_a_key_repeats() {
        let text = r#"{"b": 1, "\u0061": [ 2 ], "c":{"x":"y"}}"#;
        let members = Members::read(text).unwrap();
        let keys: Vec<&str> = members.0.iter().map(|(k, _)| k.as_ref()).collect();
        assert_eq!(keys, ["b", "a", "c"]);
        assert_eq!(members.get("a").unwrap().get(), "[ 2 ]");
        assert!(Members::read(r#"{"a": 1, "\u0061": 2}"#).is_none());
        assert!(Members::read("[1]").is_none());

        let edits = Edits {
            drop: vec!["b"],
            replace: vec![("c", RawValue::from_string("{ }".into()).unwrap())],
            add: vec![("d", serde_json::json!("é"))],
        };
        assert_eq!(
            members.write(&edits).unwrap().get(),
            r#"{"a":[ 2 ],"c":{ },"d":"é"}"#
        );
    }
}
