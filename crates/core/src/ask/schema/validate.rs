//! Every JSON Schema verdict the app gives: on an `accept` (does the content answer the
//! requested form schema?) and on the arguments the person enters for a tool run.
//!
//! Library choice: the `jsonschema` crate (0.61, default features off: no HTTP/file `$ref`
//! retrieval) because it is the maintained, spec-conformant Rust validator, asserts
//! email/uri/date/date-time when told to, and reports each error's instance path and kind, which
//! map directly to a field and a sentence for a person. Hand-written here: only the
//! person-readable messages, the mapping of error paths to field names, and normalizing
//! integral floats (`5.0` -> `5`) in integer fields before sending.

use jsonschema::error::ValidationErrorKind;
use jsonschema::{Draft, ValidationError, Validator};
use serde_json::{Map, Value};

use super::{FieldError, FieldKind, FormSchema};

/// Judges an `accept`'s `content` against the form. `schema` must come from
/// [`parse_form_schema`](super::parse_form_schema) of `raw_schema`.
///
/// Returns the content to send (keys in field order, integers normalized), or every problem
/// found, each on its field (`""` for the answer as a whole), form-level errors first and then
/// in field order.
///
/// # Errors
///
/// The list of [`FieldError`]s; never empty.
pub fn validate_answer(
    schema: &FormSchema,
    raw_schema: &Value,
    content: &Value,
) -> Result<Map<String, Value>, Vec<FieldError>> {
    let Some(answer) = content.as_object() else {
        return Err(vec![FieldError::new(
            "",
            "The answer must be a set of named fields (a JSON object)",
        )]);
    };
    let validator = build_validator(raw_schema, true).map_err(|_| {
        vec![FieldError::new(
            "",
            "The form's schema cannot be checked, so nothing can be sent",
        )]
    })?;
    let errors = field_errors(&validator, schema, content);
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(schema
        .fields
        .iter()
        .filter_map(|field| {
            let value = answer.get(&field.name)?;
            let value = match field.kind {
                FieldKind::Number { integer: true, .. } => normalize_integer(value),
                _ => value.clone(),
            };
            Some((field.name.clone(), value))
        })
        .collect())
}

/// Removes `$schema` from `schema` and from every subschema in it (not from the data it holds,
/// such as a `const` or a `default`).
fn one_draft(schema: &mut Value) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    obj.remove("$schema");
    for key in [
        "items",
        "not",
        "if",
        "then",
        "else",
        "additionalProperties",
        "contains",
    ] {
        if let Some(sub) = obj.get_mut(key) {
            one_draft(sub);
        }
    }
    for key in ["oneOf", "anyOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(subs)) = obj.get_mut(key) {
            subs.iter_mut().for_each(one_draft);
        }
    }
    for key in ["properties", "patternProperties", "$defs", "definitions"] {
        if let Some(Value::Object(subs)) = obj.get_mut(key) {
            subs.values_mut().for_each(one_draft);
        }
    }
}

/// The validator for answers to `raw`: JSON Schema 2020-12 with formats asserted, plus what the
/// subset implies but does not spell out: no keys beyond the fields (`additionalProperties:
/// false`) and no choice picked twice (`uniqueItems: true`). `$schema` is dropped, at the top
/// and in every subschema, so a stray draft URI cannot change the rules (the validator reads
/// the draft of each subschema anew, and draft-04's ignores `const`). With `with_required` false, `required` is dropped (to
/// judge defaults, where absent fields are fine).
pub(crate) fn build_validator(
    raw: &Value,
    with_required: bool,
) -> Result<Validator, ValidationError<'static>> {
    let mut schema = raw.clone();
    one_draft(&mut schema);
    if let Some(top) = schema.as_object_mut() {
        top.insert("additionalProperties".into(), Value::Bool(false));
        if !with_required {
            top.remove("required");
        }
        if let Some(Value::Object(props)) = top.get_mut("properties") {
            for prop in props.values_mut() {
                if let Some(prop) = prop.as_object_mut()
                    && prop.get("type").and_then(Value::as_str) == Some("array")
                {
                    prop.insert("uniqueItems".into(), Value::Bool(true));
                }
            }
        }
    }
    jsonschema::options()
        .with_draft(Draft::Draft202012)
        .should_validate_formats(true)
        .build(&schema)
}

/// What is wrong with a tool call's `arguments` under the tool's own input schema, one line
/// per error (`/path: why`); `Err` when the schema itself is not valid JSON Schema. Unlike a
/// form's answer, the schema is the tool's whole vocabulary, taken as written: its `$schema`
/// picks the draft (2020-12 when absent, as MCP says) and `format` only annotates, as the
/// server will read it, so the app never refuses a call the server would take.
pub(crate) fn argument_errors(schema: &Value, arguments: &Value) -> Result<Vec<String>, String> {
    let validator = jsonschema::options()
        .should_validate_formats(false)
        .build(schema)
        .map_err(|e| e.to_string())?;
    Ok(validator
        .iter_errors(arguments)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect())
}

/// Runs `validator` over `content` and words each error for a person, on its field.
pub(crate) fn field_errors(
    validator: &Validator,
    schema: &FormSchema,
    content: &Value,
) -> Vec<FieldError> {
    let mut out: Vec<FieldError> = Vec::new();
    for error in validator.iter_errors(content) {
        for fe in describe(&error, schema) {
            if !out.contains(&fe) {
                out.push(fe);
            }
        }
    }
    // Form-level first, then in the order the person sees the fields.
    let rank = |fe: &FieldError| {
        if fe.field.is_empty() {
            0
        } else {
            1 + schema
                .fields
                .iter()
                .position(|f| f.name == fe.field)
                .unwrap_or(schema.fields.len())
        }
    };
    out.sort_by_key(rank);
    out
}

fn describe(error: &ValidationError<'_>, schema: &FormSchema) -> Vec<FieldError> {
    let segments = pointer_segments(error.instance_path().as_str());
    let kind = error.kind();
    let Some(name) = segments.first() else {
        // The answer as a whole.
        return match kind {
            ValidationErrorKind::Required { property } => {
                let name = property
                    .as_str()
                    .map_or_else(|| property.to_string(), str::to_owned);
                vec![FieldError::new(name, "Required")]
            }
            ValidationErrorKind::AdditionalProperties { unexpected } => unexpected
                .iter()
                .map(|key| FieldError::new("", format!("{key:?} is not a field of this form")))
                .collect(),
            _ => vec![FieldError::new("", "The answer does not fit the form")],
        };
    };
    let name = name.as_str();
    let Some(field) = schema.fields.iter().find(|f| f.name == name) else {
        return vec![FieldError::new(
            "",
            format!("{name:?} is not a field of this form"),
        )];
    };
    let in_item = segments.len() > 1;
    vec![FieldError::new(name, message(kind, &field.kind, in_item))]
}

/// The unescaped segments of a JSON pointer, all as strings: a field may be named `"0"` or
/// `"01"`, which the library's own segment parser would read as array indices.
pub(crate) fn pointer_segments(pointer: &str) -> Vec<String> {
    pointer
        .split('/')
        .skip(1)
        .map(|seg| seg.replace("~1", "/").replace("~0", "~"))
        .collect()
}

fn message(kind: &ValidationErrorKind, field: &FieldKind, in_item: bool) -> String {
    use ValidationErrorKind as K;
    match kind {
        K::Type { .. } => match field {
            FieldKind::Text { .. } => "Must be text".into(),
            FieldKind::SingleSelect { .. } => "Choose one of the options".into(),
            FieldKind::Number { integer: true, .. } => "Must be a whole number".into(),
            FieldKind::Number { integer: false, .. } => "Must be a number".into(),
            FieldKind::Boolean => "Must be true or false".into(),
            FieldKind::MultiSelect { .. } if in_item => "Choose only from the options".into(),
            FieldKind::MultiSelect { .. } => "Must be a list of choices".into(),
        },
        K::MinLength { limit } => {
            format!("Must be at least {limit} {}", plural(*limit, "character"))
        }
        K::MaxLength { limit } => {
            format!("Must be at most {limit} {}", plural(*limit, "character"))
        }
        K::Minimum { limit } => format!("Must be at least {limit}"),
        K::Maximum { limit } => format!("Must be at most {limit}"),
        K::Format { format } => match format.as_str() {
            "email" => "Must be an email address, like name@example.com".into(),
            "uri" => "Must be a full address with a scheme, like https://example.com".into(),
            "date" => "Must be a date, like 2025-11-25".into(),
            "date-time" => "Must be a date and time, like 2025-11-25T14:30:00Z".into(),
            _ => "Not in the expected format".into(),
        },
        K::Enum { .. }
        | K::Constant { .. }
        | K::AnyOf { .. }
        | K::OneOfNotValid { .. }
        | K::OneOfMultipleValid { .. } => {
            if matches!(field, FieldKind::MultiSelect { .. }) {
                "Choose only from the options".into()
            } else {
                "Choose one of the options".into()
            }
        }
        K::MinItems { limit } => format!("Choose at least {limit}"),
        K::MaxItems { limit } => format!("Choose at most {limit}"),
        K::UniqueItems => "Choose each option only once".into(),
        _ => "Not a valid answer".into(),
    }
}

fn plural(n: u64, word: &str) -> String {
    if n == 1 {
        word.to_owned()
    } else {
        format!("{word}s")
    }
}

/// `5.0` -> `5` when it fits an i64; anything else unchanged.
pub(crate) fn normalize_integer(value: &Value) -> Value {
    if let Some(f) = value.as_f64()
        && !value.is_i64()
        && !value.is_u64()
        && f.fract() == 0.0
        && f >= i64::MIN as f64
        && f < i64::MAX as f64
    {
        return Value::from(f as i64);
    }
    value.clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ask::schema::parse_form_schema;
    use serde_json::json;

    fn check(raw: Value, content: Value) -> Result<Map<String, Value>, Vec<FieldError>> {
        let form = parse_form_schema(&raw).expect("valid schema");
        validate_answer(&form, &raw, &content)
    }

    fn errs(raw: Value, content: Value) -> Vec<FieldError> {
        check(raw, content).expect_err("answer should be refused")
    }

    /// A choice's `$schema` naming draft-04 does not make the validator skip its `const`
    /// (the validator read each subschema's draft anew, and draft-04 has no `const`).
    #[test]
    fn a_subschemas_draft_cannot_turn_a_choice_off() {
        let raw = json!({"type": "object", "properties": {"role": {"type": "string", "oneOf": [
            {"const": "viewer", "title": "Viewer",
             "$schema": "http://json-schema.org/draft-04/schema#"},
            {"const": "editor", "title": "Editor"}]}}});
        assert!(!errs(raw.clone(), json!({"role": "admin"})).is_empty());
        assert!(check(raw, json!({"role": "viewer"})).is_ok());
    }

    #[test]
    fn required_missing_is_on_the_field() {
        let raw =
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]});
        assert_eq!(errs(raw, json!({})), vec![FieldError::new("a", "Required")]);
    }

    #[test]
    fn unknown_key_is_form_level() {
        let raw = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let e = errs(raw, json!({"a": "x", "evil": 1}));
        assert_eq!(
            e,
            vec![FieldError::new("", "\"evil\" is not a field of this form")]
        );
    }

    #[test]
    fn non_object_content_is_form_level() {
        let raw = json!({"type": "object", "properties": {}});
        for content in [json!(null), json!([]), json!("x")] {
            let e = errs(raw.clone(), content);
            assert_eq!(e.len(), 1);
            assert_eq!(e[0].field, "");
        }
    }

    #[test]
    fn string_for_boolean_is_not_coerced() {
        let raw = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
        assert_eq!(
            errs(raw, json!({"ok": "true"})),
            vec![FieldError::new("ok", "Must be true or false")]
        );
    }

    #[test]
    fn integer_float_is_sent_as_integer() {
        let raw = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let out = check(raw, json!({"n": 5.0})).unwrap();
        assert!(out["n"].is_i64());
        assert_eq!(out["n"], json!(5));
    }

    #[test]
    fn output_keys_follow_field_order() {
        let raw = json!({"type": "object", "properties": {"z": {"type": "string"}, "a": {"type": "string"}}});
        let out = check(raw, json!({"a": "1", "z": "2"})).unwrap();
        assert_eq!(out.keys().collect::<Vec<_>>(), ["z", "a"]);
    }

    #[test]
    fn errors_are_in_field_order_form_level_first() {
        let raw = json!({"type": "object", "properties": {
            "z": {"type": "string"}, "a": {"type": "boolean"}
        }, "required": ["z"]});
        let e = errs(raw, json!({"a": 1, "x": 2}));
        let fields: Vec<_> = e.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["", "z", "a"]);
    }

    #[test]
    fn field_names_with_pointer_characters_map_back() {
        let raw =
            json!({"type": "object", "properties": {"a/b~c": {"type": "integer", "maximum": 1}}});
        assert_eq!(
            errs(raw, json!({"a/b~c": 2})),
            vec![FieldError::new("a/b~c", "Must be at most 1")]
        );
    }

    #[test]
    fn stray_schema_uri_does_not_change_the_rules() {
        let raw = json!({"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
            "properties": {"e": {"type": "string", "format": "email"}}});
        assert_eq!(errs(raw, json!({"e": "nope"}))[0].field, "e");
    }

    #[test]
    fn numeric_field_names_are_names_not_indices() {
        let raw = json!({"type": "object", "properties": {
            "0": {"type": "boolean"}, "01": {"type": "array", "items": {"enum": ["a"]}}
        }});
        assert_eq!(
            errs(raw, json!({"0": "no", "01": ["b"]})),
            vec![
                FieldError::new("0", "Must be true or false"),
                FieldError::new("01", "Choose only from the options")
            ]
        );
    }

    #[test]
    fn pointer_segments_unescape() {
        assert_eq!(pointer_segments(""), Vec::<String>::new());
        assert_eq!(pointer_segments("/a~1b~0c/0"), ["a/b~c", "0"]);
        assert_eq!(pointer_segments("/"), [""]);
    }

    #[test]
    fn normalize_integer_keeps_non_integral_and_huge() {
        assert_eq!(normalize_integer(&json!(2.5)), json!(2.5));
        assert_eq!(normalize_integer(&json!(-3.0)), json!(-3));
        assert!(normalize_integer(&json!(1e300)).is_f64());
        assert_eq!(normalize_integer(&json!("7")), json!("7"));
    }
}
