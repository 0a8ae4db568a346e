//! The form of an elicitation: what a server may ask for, and whether an answer fits.
//!
//! MCP elicitation (form mode, spec 2025-11-25) sends `requestedSchema`, a restricted JSON Schema:
//! a flat object whose properties are strings, numbers, booleans, single selects and multi
//! selects. This module works from that schema *as received* (a [`serde_json::Value`]), never
//! from rmcp's typed model, which drops keywords it does not know and loses integer enum values.
//!
//! Three jobs, one per entry point:
//! - [`parse_form_schema`] turns the raw schema into a [`FormSchema`] the dialog renders (fields in
//!   the order the server sent them), or says precisely why it is outside the subset, so the
//!   caller can answer JSON-RPC -32602 with [`SchemaError`]'s text instead of guessing.
//! - [`validate_answer`] is the backend's verdict on an `accept`'s content before anything goes
//!   out: per-field errors written for a person, or the content to send.
//! - [`defaults`] is the content of the untouched form.
//! - [`redact_secrets`] is an accepted answer as it may be written down: fields flagged
//!   [`Field::secret`] at parse time keep only their length.
//!
//! # What is tolerated and what is rejected
//!
//! The rule: a keyword that changes which answers are valid is honoured only if it is in the
//! spec's subset, otherwise the whole schema is rejected (a form that silently ignored it would
//! send answers the server considers invalid, or the validator would refuse answers the form
//! never explained). Keywords that only annotate are tolerated, as JSON Schema 2020-12 does.
//!
//! Tolerated:
//! - unknown and annotation keywords anywhere (`$schema` (any string; validation always uses
//!   2020-12 semantics), `$id`, `$comment`, `title`, `description`, `examples`, `deprecated`,
//!   `readOnly`, `x-...`, ...), as long as they are well-formed JSON Schema;
//! - a missing top-level `properties` (an empty form, e.g. a plain confirmation);
//! - top-level `additionalProperties: true | false` (unknown answer keys are refused either way);
//! - `default: null` (treated as no default);
//! - `uniqueItems` on a multi select (items are required to be unique either way);
//! - a titled option (`oneOf`/`anyOf` entry) without `title` (its value is then its label),
//!   and `type: "string"` beside `const` in an option or beside `anyOf` in `items`;
//! - a missing `items.type` beside `items.enum`;
//! - integral numbers written as floats (`5.0`) where a count or an integer is expected;
//! - a name listed twice in `required`;
//! - `format: "password"` on a text field (not in the spec): it constrains nothing and marks the
//!   field as a secret (see [`redact_secrets`]).
//!
//! Rejected (with the path of the offending keyword): anything that is not an object where a
//! schema is expected, a top-level `type` other than `"object"`, a property without `type`,
//! type unions, `object` / `null` properties, arrays of anything but string choices, a `format`
//! other than email / uri / date / date-time (or password), non-string or duplicate choice values, empty
//! choice lists, `enumNames` of the wrong length, `$ref` / `$defs` and every applicator or
//! assertion outside the subset (`pattern`, `exclusiveMinimum`, `multipleOf`, `allOf`, `anyOf` on
//! a scalar, `const`, `if`, ...), bounds that cannot be met (`minLength > maxLength`,
//! `minimum > maximum`, `minItems > maxItems`, `minItems` above the number of options), a
//! `required` entry naming no property, an empty property name, and a default that is not a
//! valid answer for its own field.
//!
//! # Validation semantics
//!
//! JSON Schema semantics, with formats asserted: `""` satisfies `required` (only `minLength`
//! refuses it), lengths count Unicode code points, `5.0` is an integer (and is sent as `5`).
//! Nothing is coerced: `"true"` is not a boolean and `"5"` is not a number.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod parse;
mod secret;
mod validate;

pub use parse::{MAX_CHOICES, MAX_FIELDS, parse_form_schema};
pub use secret::{flag_by_message, redact_secrets};
pub(crate) use validate::argument_errors;
pub use validate::validate_answer;

/// A form to render, derived from an elicitation's `requestedSchema`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct FormSchema {
    /// The fields, in the order the server listed them in `properties`.
    pub fields: Vec<Field>,
}

/// One question of the form. Serialized flat: the [`FieldKind`]'s `kind` tag and its settings sit
/// beside `name`, `title`, ... (`{"name": "age", ..., "kind": "number", "integer": true, ...}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct Field {
    /// The property name: the key of the answer. Untrusted text.
    pub name: String,
    /// Untrusted text; the UI falls back to `name` when absent.
    pub title: Option<String>,
    /// Untrusted text.
    pub description: Option<String>,
    pub required: bool,
    /// The field asks for something secret (a password, key, token, card number, ...; see
    /// `secret.rs`): the dialog warns and masks it, and the audit log keeps only its length.
    /// Absent in records written before it was kept.
    #[serde(default)]
    pub secret: bool,
    /// A valid answer for this field (checked at parse time); integers are normalized (`5.0` -> `5`).
    pub default: Option<Value>,
    #[serde(flatten)]
    pub kind: FieldKind,
}

/// What sort of input a field is, with the constraints the UI should show and enforce.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum FieldKind {
    Text {
        /// In Unicode code points, as JSON Schema counts.
        #[ts(type = "number | null")]
        min_length: Option<u64>,
        #[ts(type = "number | null")]
        max_length: Option<u64>,
        format: Option<TextFormat>,
    },
    Number {
        /// `type: "integer"`: the answer must be a whole number.
        integer: bool,
        minimum: Option<f64>,
        maximum: Option<f64>,
    },
    Boolean,
    /// Exactly one of `options`; the answer is the option's `value`.
    SingleSelect {
        options: Vec<Choice>,
    },
    /// Any number of distinct `options` within `min_items..=max_items`; the answer is a list of values.
    MultiSelect {
        options: Vec<Choice>,
        #[ts(type = "number | null")]
        min_items: Option<u64>,
        #[ts(type = "number | null")]
        max_items: Option<u64>,
    },
}

/// The `format`s a text field may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "kebab-case")]
pub enum TextFormat {
    Email,
    /// An absolute URI: a scheme is required.
    Uri,
    /// RFC 3339 full-date, e.g. `2025-11-25`.
    Date,
    /// RFC 3339 date-time, e.g. `2025-11-25T14:30:00Z`.
    DateTime,
}

/// One option of a select.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct Choice {
    /// What goes into the answer.
    pub value: String,
    /// What the person sees (from `oneOf`/`anyOf` `title` or legacy `enumNames`); the UI shows
    /// `value` when absent. Untrusted text.
    pub label: Option<String>,
}

/// Why a `requestedSchema` cannot be shown as a form. Its text is what the caller puts in the
/// JSON-RPC -32602 error, e.g. `properties.age: nested objects are not supported`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", display_schema_error(path, reason))]
pub struct SchemaError {
    /// Where in `requestedSchema`, dotted: `properties.age.format`, `required`; empty for the
    /// schema as a whole.
    pub path: String,
    pub reason: String,
}

fn display_schema_error(path: &str, reason: &str) -> String {
    if path.is_empty() {
        reason.to_owned()
    } else {
        format!("{path}: {reason}")
    }
}

impl SchemaError {
    pub(crate) fn new(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

/// One reason an answer was refused, for the person filling in the form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[ts(export)]
#[serde(rename_all = "camelCase")]
pub struct FieldError {
    /// The field's name; `""` for a problem with the answer as a whole (e.g. an unknown key).
    pub field: String,
    /// A sentence for a person: "Required", "Must be at most 8", "Choose at most 2".
    pub message: String,
}

impl FieldError {
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// The content of the untouched form: every field that has a default, with it; fields without
/// a default are absent. In field order.
pub fn defaults(schema: &FormSchema) -> Map<String, Value> {
    schema
        .fields
        .iter()
        .filter_map(|field| Some((field.name.clone(), field.default.clone()?)))
        .collect()
}

#[cfg(test)]
mod fuzz;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn field_serializes_flat_with_camel_case_kind_tag() {
        let field = Field {
            name: "tags".into(),
            title: Some("Tags".into()),
            description: None,
            required: true,
            secret: false,
            default: Some(json!(["a"])),
            kind: FieldKind::MultiSelect {
                options: vec![Choice {
                    value: "a".into(),
                    label: Some("A".into()),
                }],
                min_items: Some(1),
                max_items: None,
            },
        };
        let json = serde_json::to_value(&field).unwrap();
        assert_eq!(
            json,
            json!({
                "name": "tags", "title": "Tags", "description": null, "required": true,
                "secret": false, "default": ["a"], "kind": "multiSelect",
                "options": [{"value": "a", "label": "A"}], "minItems": 1, "maxItems": null
            })
        );
        let back: Field = serde_json::from_value(json).unwrap();
        assert_eq!(back, field);
    }

    #[test]
    fn text_format_and_kinds_use_spec_spelling() {
        let kind = FieldKind::Text {
            min_length: None,
            max_length: Some(3),
            format: Some(TextFormat::DateTime),
        };
        assert_eq!(
            serde_json::to_value(&kind).unwrap(),
            json!({"kind": "text", "minLength": null, "maxLength": 3, "format": "date-time"})
        );
        assert_eq!(
            serde_json::to_value(FieldKind::SingleSelect { options: vec![] }).unwrap(),
            json!({"kind": "singleSelect", "options": []})
        );
        assert_eq!(
            serde_json::to_value(FieldKind::Boolean).unwrap(),
            json!({"kind": "boolean"})
        );
    }

    #[test]
    fn schema_error_display_names_the_path() {
        assert_eq!(
            SchemaError::new("properties.age", "nested objects are not supported").to_string(),
            "properties.age: nested objects are not supported"
        );
        assert_eq!(
            SchemaError::new("", "must be an object").to_string(),
            "must be an object"
        );
    }

    #[test]
    fn field_error_serializes_camel_case() {
        assert_eq!(
            serde_json::to_value(FieldError::new("", "x")).unwrap(),
            json!({"field": "", "message": "x"})
        );
    }

    #[test]
    fn defaults_skip_fields_without_default_and_keep_order() {
        let text = |name: &str, default: Option<Value>| Field {
            name: name.into(),
            title: None,
            description: None,
            required: false,
            secret: false,
            default,
            kind: FieldKind::Boolean,
        };
        let schema = FormSchema {
            fields: vec![
                text("z", Some(json!(true))),
                text("m", None),
                text("a", Some(json!(false))),
            ],
        };
        let got = defaults(&schema);
        assert_eq!(got.keys().collect::<Vec<_>>(), ["z", "a"]);
        assert_eq!(Value::Object(got), json!({"z": true, "a": false}));
    }
}
