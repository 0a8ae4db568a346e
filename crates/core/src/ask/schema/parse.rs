//! `requestedSchema` (raw JSON) -> [`FormSchema`], or the first reason it is outside the subset.
//!
//! Hand-written on purpose: the point is the *reason* a schema is refused, and which subset
//! keywords map to which widget; no schema library knows MCP's subset. Whether keywords are
//! well-formed JSON Schema, and whether each default fits its field, is then checked by the same
//! validator that judges answers (see `validate.rs`), so the two can never disagree.

use serde_json::{Map, Value};

use super::secret::looks_secret;
use super::validate::{build_validator, field_errors, pointer_segments};
use super::{Choice, Field, FieldKind, FormSchema, SchemaError, TextFormat};

/// Keywords that take part in validation (or pull in other schemas). Outside the places where
/// the subset allows them, their presence rejects the schema; every other keyword is an
/// annotation and is tolerated.
const ASSERTING_KEYWORDS: &[&str] = &[
    "$ref",
    "$dynamicRef",
    "$recursiveRef",
    "$defs",
    "definitions",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "dependentRequired",
    "dependencies",
    "prefixItems",
    "items",
    "additionalItems",
    "contains",
    "minContains",
    "maxContains",
    "unevaluatedItems",
    "unevaluatedProperties",
    "properties",
    "patternProperties",
    "additionalProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "required",
    "type",
    "enum",
    "enumNames",
    "const",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "format",
];

/// A form has at most this many fields: a person fills it in, and past it the checks that
/// compare fields with each other would let one question hold a thread for minutes.
pub const MAX_FIELDS: usize = 100;
/// A choice field offers at most this many choices (every time zone fits).
pub const MAX_CHOICES: usize = 2_000;

/// Reads an elicitation's `requestedSchema` as received and returns the form to render, fields
/// in the order sent. See the module docs of [`crate::ask::schema`] for what is tolerated.
///
/// # Errors
///
/// A [`SchemaError`] naming the first keyword outside the 2025-11-25 subset and why; its
/// `Display` is meant for a JSON-RPC -32602 error message.
pub fn parse_form_schema(raw: &Value) -> Result<FormSchema, SchemaError> {
    let top = raw
        .as_object()
        .ok_or_else(|| SchemaError::new("", "the requested schema must be a JSON object"))?;

    match top.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => {
            return Err(SchemaError::new(
                "type",
                format!("must be \"object\", not {}", short(other)),
            ));
        }
        None => {
            return Err(SchemaError::new(
                "type",
                "is missing; it must be \"object\"",
            ));
        }
    }
    if let Some(s) = top.get("$schema")
        && !s.is_string()
    {
        return Err(SchemaError::new("$schema", "must be a string"));
    }
    if let Some(extra) = top.get("additionalProperties")
        && !extra.is_boolean()
    {
        return Err(SchemaError::new(
            "additionalProperties",
            "schemas for additional properties are not supported",
        ));
    }
    reject_asserting(
        top,
        "",
        &["type", "properties", "required", "additionalProperties"],
        "at the top level of an elicitation schema",
    )?;

    let empty = Map::new();
    let properties = match top.get("properties") {
        None => &empty,
        Some(Value::Object(p)) => p,
        Some(_) => {
            return Err(SchemaError::new(
                "properties",
                "must be an object mapping field names to field schemas",
            ));
        }
    };

    if properties.len() > MAX_FIELDS {
        return Err(SchemaError::new(
            "properties",
            format!(
                "{} fields are more than a person can be asked to fill in ({MAX_FIELDS})",
                properties.len()
            ),
        ));
    }
    let required = parse_required(top.get("required"), properties)?;

    let mut fields = Vec::with_capacity(properties.len());
    for (name, prop) in properties {
        let path = format!("properties.{name}");
        if name.is_empty() {
            return Err(SchemaError::new(path, "a field name must not be empty"));
        }
        let mut field = parse_field(name, prop, &path)?;
        field.required = required.contains(name.as_str());
        fields.push(field);
    }
    let form = FormSchema { fields };

    check_with_validator(raw, &form)?;
    Ok(form)
}

fn parse_required<'a>(
    required: Option<&'a Value>,
    properties: &Map<String, Value>,
) -> Result<std::collections::HashSet<&'a str>, SchemaError> {
    let Some(required) = required else {
        return Ok(Default::default());
    };
    let list = required
        .as_array()
        .ok_or_else(|| SchemaError::new("required", "must be a list of field names"))?;
    // (Each name must be a property's, so a longer list repeats one.)
    if list.len() > MAX_FIELDS {
        return Err(SchemaError::new(
            "required",
            format!("lists more than {MAX_FIELDS} field names"),
        ));
    }
    let mut names = std::collections::HashSet::with_capacity(list.len());
    for (i, entry) in list.iter().enumerate() {
        let name = entry.as_str().ok_or_else(|| {
            SchemaError::new(format!("required[{i}]"), "must be a field name (a string)")
        })?;
        if !properties.contains_key(name) {
            return Err(SchemaError::new(
                format!("required[{i}]"),
                format!("names {name:?}, which is not one of the properties"),
            ));
        }
        names.insert(name);
    }
    Ok(names)
}

fn parse_field(name: &str, prop: &Value, path: &str) -> Result<Field, SchemaError> {
    let obj = prop
        .as_object()
        .ok_or_else(|| SchemaError::new(path, "a field's schema must be a JSON object"))?;

    let ty = match obj.get("type") {
        None => return Err(SchemaError::new(path, "the field has no \"type\"")),
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(_)) => {
            return Err(SchemaError::new(path, "type unions are not supported"));
        }
        Some(other) => {
            return Err(SchemaError::new(
                format!("{path}.type"),
                format!("must be a type name, not {}", short(other)),
            ));
        }
    };

    let title = optional_string(obj, "title", path)?;
    let description = optional_string(obj, "description", path)?;

    let kind = match ty {
        "string" if obj.contains_key("enum") || obj.contains_key("oneOf") => {
            parse_single_select(obj, path)?
        }
        "string" => parse_text(obj, path)?,
        "number" | "integer" => parse_number(obj, path, ty == "integer")?,
        "boolean" => {
            reject_asserting(obj, path, &["type"], "on a boolean field")?;
            FieldKind::Boolean
        }
        "array" => parse_multi_select(obj, path)?,
        "object" => return Err(SchemaError::new(path, "nested objects are not supported")),
        "null" => return Err(SchemaError::new(path, "null fields are not supported")),
        other => {
            return Err(SchemaError::new(path, format!("unknown type {other:?}")));
        }
    };

    let default = match obj.get("default") {
        None | Some(Value::Null) => None,
        Some(value) => Some(normalize_default(value, &kind)),
    };
    let secret = looks_secret(
        &kind,
        name,
        title.as_deref(),
        description.as_deref(),
        obj.get("format").and_then(Value::as_str),
        obj.get("writeOnly") == Some(&Value::Bool(true)),
    );

    Ok(Field {
        name: name.to_owned(),
        title,
        description,
        required: false,
        secret,
        default,
        kind,
    })
}

fn parse_text(obj: &Map<String, Value>, path: &str) -> Result<FieldKind, SchemaError> {
    reject_asserting(
        obj,
        path,
        &["type", "minLength", "maxLength", "format"],
        "on a text field",
    )?;
    let min_length = optional_count(obj, "minLength", path)?;
    let max_length = optional_count(obj, "maxLength", path)?;
    if let (Some(min), Some(max)) = (min_length, max_length)
        && min > max
    {
        return Err(SchemaError::new(
            path,
            format!("minLength ({min}) is greater than maxLength ({max})"),
        ));
    }
    let format = match obj.get("format") {
        None => None,
        Some(Value::String(f)) => match f.as_str() {
            "email" => Some(TextFormat::Email),
            "uri" => Some(TextFormat::Uri),
            "date" => Some(TextFormat::Date),
            "date-time" => Some(TextFormat::DateTime),
            // Not in the spec, but servers send it; it constrains nothing and marks the
            // field as a secret (see `secret.rs`).
            "password" => None,
            other => {
                return Err(SchemaError::new(
                    format!("{path}.format"),
                    format!(
                        "format {other:?} is not supported (only email, uri, date and date-time)"
                    ),
                ));
            }
        },
        Some(_) => {
            return Err(SchemaError::new(
                format!("{path}.format"),
                "must be a string",
            ));
        }
    };
    // The dialog's pickers send a date as `2025-01-11` and a moment as
    // `2025-01-11T18:30:00+05:30`: lengths that leave that out make a field nobody can answer.
    let sent_length = match format {
        Some(TextFormat::Date) => Some(10),
        Some(TextFormat::DateTime) => Some(25),
        _ => None,
    };
    if let Some(sent) = sent_length
        && (min_length.is_some_and(|min| min > sent) || max_length.is_some_and(|max| max < sent))
    {
        return Err(SchemaError::new(
            path,
            format!(
                "minLength and maxLength must admit {sent} characters, the length of the {} the dialog sends",
                if sent == 10 { "date" } else { "date and time" }
            ),
        ));
    }
    Ok(FieldKind::Text {
        min_length,
        max_length,
        format,
    })
}

fn parse_number(
    obj: &Map<String, Value>,
    path: &str,
    integer: bool,
) -> Result<FieldKind, SchemaError> {
    let what = if integer {
        "on an integer field"
    } else {
        "on a number field"
    };
    reject_asserting(obj, path, &["type", "minimum", "maximum"], what)?;
    let bound = |key: &str| -> Result<Option<f64>, SchemaError> {
        match obj.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| SchemaError::new(format!("{path}.{key}"), "must be a number")),
        }
    };
    let minimum = bound("minimum")?;
    let maximum = bound("maximum")?;
    if let (Some(min), Some(max)) = (minimum, maximum)
        && min > max
    {
        return Err(SchemaError::new(
            path,
            format!("minimum ({min}) is greater than maximum ({max})"),
        ));
    }
    if integer
        && let (Some(min), Some(max)) = (minimum, maximum)
        && min.ceil() > max.floor()
    {
        return Err(SchemaError::new(
            path,
            format!("no whole number lies between minimum ({min}) and maximum ({max})"),
        ));
    }
    Ok(FieldKind::Number {
        integer,
        minimum,
        maximum,
    })
}

fn parse_single_select(obj: &Map<String, Value>, path: &str) -> Result<FieldKind, SchemaError> {
    reject_asserting(
        obj,
        path,
        &["type", "enum", "enumNames", "oneOf"],
        "on a single-choice field",
    )?;
    let options = match (obj.get("enum"), obj.get("oneOf")) {
        (Some(_), Some(_)) => {
            return Err(SchemaError::new(
                path,
                "a choice field must use either enum or oneOf, not both",
            ));
        }
        (Some(values), None) => {
            let labels = match obj.get("enumNames") {
                None => None,
                Some(names) => Some(string_list(names, &format!("{path}.enumNames"))?),
            };
            let values = enum_values(values, &format!("{path}.enum"))?;
            if let Some(labels) = &labels
                && labels.len() != values.len()
            {
                return Err(SchemaError::new(
                    format!("{path}.enumNames"),
                    format!(
                        "has {} names for {} enum values",
                        labels.len(),
                        values.len()
                    ),
                ));
            }
            let mut labels = labels.map(Vec::into_iter);
            values
                .into_iter()
                .map(|value| Choice {
                    value,
                    label: labels.as_mut().and_then(Iterator::next),
                })
                .collect()
        }
        (None, Some(one_of)) => {
            if obj.contains_key("enumNames") {
                return Err(SchemaError::new(
                    format!("{path}.enumNames"),
                    "enumNames only goes with enum",
                ));
            }
            titled_options(one_of, &format!("{path}.oneOf"))?
        }
        (None, None) => unreachable!("only called when enum or oneOf is present"),
    };
    Ok(FieldKind::SingleSelect { options })
}

fn parse_multi_select(obj: &Map<String, Value>, path: &str) -> Result<FieldKind, SchemaError> {
    reject_asserting(
        obj,
        path,
        &["type", "items", "minItems", "maxItems", "uniqueItems"],
        "on a multi-choice field",
    )?;
    if let Some(unique) = obj.get("uniqueItems")
        && !unique.is_boolean()
    {
        return Err(SchemaError::new(
            format!("{path}.uniqueItems"),
            "must be true or false",
        ));
    }
    let items_path = format!("{path}.items");
    let items = match obj.get("items") {
        None => {
            return Err(SchemaError::new(
                path,
                "an array field needs items with enum or anyOf choices",
            ));
        }
        Some(Value::Object(items)) => items,
        Some(_) => {
            return Err(SchemaError::new(
                items_path,
                "must be a schema object with enum or anyOf choices",
            ));
        }
    };
    match items.get("type") {
        None | Some(Value::String(_)) => {}
        Some(Value::Array(_)) => {
            return Err(SchemaError::new(
                items_path,
                "type unions are not supported",
            ));
        }
        Some(other) => {
            return Err(SchemaError::new(
                format!("{items_path}.type"),
                format!("must be a type name, not {}", short(other)),
            ));
        }
    }
    match items.get("type").and_then(Value::as_str) {
        None | Some("string") => {}
        Some("object") => {
            return Err(SchemaError::new(
                items_path,
                "arrays of objects are not supported",
            ));
        }
        Some("array") => {
            return Err(SchemaError::new(
                items_path,
                "nested arrays are not supported",
            ));
        }
        Some(other) => {
            return Err(SchemaError::new(
                items_path,
                format!("arrays of {other} are not supported, only of string choices"),
            ));
        }
    }
    let options = match (items.get("enum"), items.get("anyOf")) {
        (Some(_), Some(_)) => {
            return Err(SchemaError::new(
                items_path,
                "choices must use either enum or anyOf, not both",
            ));
        }
        (Some(values), None) => {
            reject_asserting(
                items,
                &items_path,
                &["type", "enum"],
                "in the items of a multi-choice field",
            )?;
            enum_values(values, &format!("{items_path}.enum"))?
                .into_iter()
                .map(|value| Choice { value, label: None })
                .collect::<Vec<_>>()
        }
        (None, Some(any_of)) => {
            reject_asserting(
                items,
                &items_path,
                &["type", "anyOf"],
                "in the items of a multi-choice field",
            )?;
            titled_options(any_of, &format!("{items_path}.anyOf"))?
        }
        (None, None) => {
            return Err(SchemaError::new(
                items_path,
                "free-form lists are not supported; items needs enum or anyOf choices",
            ));
        }
    };
    let min_items = optional_count(obj, "minItems", path)?;
    let max_items = optional_count(obj, "maxItems", path)?;
    if let (Some(min), Some(max)) = (min_items, max_items)
        && min > max
    {
        return Err(SchemaError::new(
            path,
            format!("minItems ({min}) is greater than maxItems ({max})"),
        ));
    }
    if let Some(min) = min_items
        && min > options.len() as u64
    {
        return Err(SchemaError::new(
            format!("{path}.minItems"),
            format!(
                "asks for at least {min} choices but only {} exist",
                options.len()
            ),
        ));
    }
    Ok(FieldKind::MultiSelect {
        options,
        min_items,
        max_items,
    })
}

/// `enum`: a non-empty list of distinct strings.
fn enum_values(values: &Value, path: &str) -> Result<Vec<String>, SchemaError> {
    let list = values
        .as_array()
        .ok_or_else(|| SchemaError::new(path, "must be a list of strings"))?;
    if list.is_empty() {
        return Err(SchemaError::new(path, "must list at least one choice"));
    }
    too_many_choices(list.len(), path)?;
    let mut seen = std::collections::HashSet::with_capacity(list.len());
    let mut out: Vec<String> = Vec::with_capacity(list.len());
    for (i, v) in list.iter().enumerate() {
        let s = v.as_str().ok_or_else(|| {
            SchemaError::new(
                format!("{path}[{i}]"),
                format!("choice values must be strings, not {}", short(v)),
            )
        })?;
        if !seen.insert(s) {
            return Err(SchemaError::new(
                format!("{path}[{i}]"),
                format!("the choice {s:?} is listed twice"),
            ));
        }
        out.push(s.to_owned());
    }
    Ok(out)
}

fn too_many_choices(count: usize, path: &str) -> Result<(), SchemaError> {
    if count > MAX_CHOICES {
        return Err(SchemaError::new(
            path,
            format!("{count} choices are more than a person can be offered ({MAX_CHOICES})"),
        ));
    }
    Ok(())
}

/// `oneOf` / `anyOf`: a non-empty list of `{const: string, title?: string}` with distinct consts.
fn titled_options(list: &Value, path: &str) -> Result<Vec<Choice>, SchemaError> {
    let list = list
        .as_array()
        .ok_or_else(|| SchemaError::new(path, "must be a list of {const, title} choices"))?;
    if list.is_empty() {
        return Err(SchemaError::new(path, "must list at least one choice"));
    }
    too_many_choices(list.len(), path)?;
    let mut seen = std::collections::HashSet::with_capacity(list.len());
    let mut out: Vec<Choice> = Vec::with_capacity(list.len());
    for (i, option) in list.iter().enumerate() {
        let opt_path = format!("{path}[{i}]");
        let obj = option.as_object().ok_or_else(|| {
            SchemaError::new(&opt_path, "a choice must be a {const, title} object")
        })?;
        match obj.get("type") {
            None => {}
            Some(Value::String(t)) if t == "string" => {}
            Some(_) => {
                return Err(SchemaError::new(
                    format!("{opt_path}.type"),
                    "a choice may only be of type \"string\"",
                ));
            }
        }
        reject_asserting(obj, &opt_path, &["const", "type"], "in a choice")?;
        let value = match obj.get("const") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                return Err(SchemaError::new(
                    format!("{opt_path}.const"),
                    format!("choice values must be strings, not {}", short(other)),
                ));
            }
            None => {
                return Err(SchemaError::new(
                    &opt_path,
                    "a choice needs a \"const\" value",
                ));
            }
        };
        if !seen.insert(value.clone()) {
            return Err(SchemaError::new(
                format!("{opt_path}.const"),
                format!("the choice {value:?} is listed twice"),
            ));
        }
        let label = optional_string(obj, "title", &opt_path)?;
        out.push(Choice { value, label });
    }
    Ok(out)
}

fn string_list(v: &Value, path: &str) -> Result<Vec<String>, SchemaError> {
    v.as_array()
        .and_then(|list| {
            list.iter()
                .map(|s| s.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
        })
        .ok_or_else(|| SchemaError::new(path, "must be a list of strings"))
}

fn optional_string(
    obj: &Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Option<String>, SchemaError> {
    match obj.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(SchemaError::new(
            format!("{path}.{key}"),
            "must be a string",
        )),
    }
}

/// A length or item count: a non-negative integer (`5.0` allowed, as JSON Schema does).
fn optional_count(
    obj: &Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Option<u64>, SchemaError> {
    let Some(v) = obj.get(key) else {
        return Ok(None);
    };
    v.as_u64()
        .or_else(|| {
            v.as_f64()
                .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f <= u64::MAX as f64)
                .map(|f| f as u64)
        })
        .map(Some)
        .ok_or_else(|| {
            SchemaError::new(
                format!("{path}.{key}"),
                "must be a non-negative whole number",
            )
        })
}

/// Rejects any validation keyword in `obj` other than the `allowed` ones.
fn reject_asserting(
    obj: &Map<String, Value>,
    path: &str,
    allowed: &[&str],
    context: &str,
) -> Result<(), SchemaError> {
    for key in obj.keys() {
        if ASSERTING_KEYWORDS.contains(&key.as_str()) && !allowed.contains(&key.as_str()) {
            let reason = match key.as_str() {
                "$ref" | "$dynamicRef" | "$recursiveRef" => {
                    "references ($ref) are not supported; the schema must be flat".to_owned()
                }
                "$defs" | "definitions" => {
                    "definitions are not supported; the schema must be flat".to_owned()
                }
                "required" if !path.is_empty() => {
                    "required belongs in the top-level required list".to_owned()
                }
                _ => format!("{key} is not supported {context}"),
            };
            let at = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            return Err(SchemaError::new(at, reason));
        }
    }
    Ok(())
}

/// Integer defaults written as floats (`5.0`) are stored as integers, as they will be sent.
fn normalize_default(value: &Value, kind: &FieldKind) -> Value {
    match kind {
        FieldKind::Number { integer: true, .. } => super::validate::normalize_integer(value),
        _ => value.clone(),
    }
}

/// Runs the answer validator over the schema: it refuses malformed JSON Schema (e.g.
/// `examples: 5`), and judges every default as an answer for its own field.
fn check_with_validator(raw: &Value, form: &FormSchema) -> Result<(), SchemaError> {
    let validator = build_validator(raw, false).map_err(|e| {
        let at = pointer_segments(e.instance_path().as_str()).join(".");
        SchemaError::new(
            at,
            format!("not valid JSON Schema: {}", clip(&e.to_string(), 120)),
        )
    })?;
    let defaults = super::defaults(form);
    let errors = field_errors(&validator, form, &Value::Object(defaults));
    if let Some(err) = errors.first() {
        let field = form.fields.iter().find(|f| f.name == err.field);
        let path = match field {
            Some(f) => format!("properties.{}.default", f.name),
            None => String::new(),
        };
        return Err(SchemaError::new(
            path,
            format!("the default is not a valid answer: {}", err.message),
        ));
    }
    Ok(())
}

/// A value in an error message, clipped so a hostile schema cannot flood the reason.
fn short(v: &Value) -> String {
    clip(&v.to_string(), 40)
}

fn clip(text: &str, max_chars: usize) -> String {
    if text.chars().count() > max_chars {
        let clipped: String = text.chars().take(max_chars).collect();
        format!("{clipped}…")
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(raw: Value) -> SchemaError {
        parse_form_schema(&raw).expect_err("schema should be rejected")
    }

    fn one(prop: Value) -> Result<FormSchema, SchemaError> {
        parse_form_schema(&json!({"type": "object", "properties": {"f": prop}}))
    }

    /// A date or a moment whose length keywords leave out what the dialog's picker sends could
    /// never be answered: refused as the server sent it.
    #[test]
    fn a_date_whose_lengths_leave_out_the_pickers_is_refused() {
        let field = |f: Value| json!({"type": "object", "properties": {"when": f}});
        for unanswerable in [
            json!({"type": "string", "format": "date-time", "maxLength": 20}),
            json!({"type": "string", "format": "date", "minLength": 11}),
        ] {
            let error = parse_form_schema(&field(unanswerable.clone())).unwrap_err();
            assert!(
                error.to_string().contains("must admit"),
                "{unanswerable}: {error}"
            );
        }
        for answerable in [
            json!({"type": "string", "format": "date-time", "maxLength": 25}),
            json!({"type": "string", "format": "date", "minLength": 10, "maxLength": 10}),
            json!({"type": "string", "maxLength": 5}),
        ] {
            assert!(
                parse_form_schema(&field(answerable.clone())).is_ok(),
                "{answerable}"
            );
        }
    }

    #[test]
    fn parses_each_kind() {
        let form = parse_form_schema(&json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "name": {"type": "string", "title": "Name", "minLength": 1, "maxLength": 20},
                "when": {"type": "string", "format": "date"},
                "age": {"type": "integer", "minimum": 0, "maximum": 150, "default": 30},
                "ratio": {"type": "number"},
                "ok": {"type": "boolean", "default": false},
                "color": {"type": "string", "oneOf": [{"const": "r", "title": "Red"}]},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 2}
            },
            "required": ["name"]
        }))
        .unwrap();
        let names: Vec<_> = form.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            ["name", "when", "age", "ratio", "ok", "color", "tags"]
        );
        assert!(form.fields[0].required);
        assert!(!form.fields[1].required);
        assert_eq!(form.fields[0].title.as_deref(), Some("Name"));
        assert_eq!(
            form.fields[0].kind,
            FieldKind::Text {
                min_length: Some(1),
                max_length: Some(20),
                format: None
            }
        );
        assert_eq!(
            form.fields[1].kind,
            FieldKind::Text {
                min_length: None,
                max_length: None,
                format: Some(TextFormat::Date)
            }
        );
        assert_eq!(
            form.fields[2].kind,
            FieldKind::Number {
                integer: true,
                minimum: Some(0.0),
                maximum: Some(150.0)
            }
        );
        assert_eq!(form.fields[2].default, Some(json!(30)));
        assert_eq!(form.fields[4].kind, FieldKind::Boolean);
        assert_eq!(
            form.fields[5].kind,
            FieldKind::SingleSelect {
                options: vec![Choice {
                    value: "r".into(),
                    label: Some("Red".into())
                }]
            }
        );
        assert_eq!(
            form.fields[6].kind,
            FieldKind::MultiSelect {
                options: vec![
                    Choice {
                        value: "a".into(),
                        label: None
                    },
                    Choice {
                        value: "b".into(),
                        label: None
                    }
                ],
                min_items: None,
                max_items: Some(2)
            }
        );
    }

    #[test]
    fn legacy_enum_names_become_labels() {
        let form =
            one(json!({"type": "string", "enum": ["x", "y"], "enumNames": ["Ex", "Why"]})).unwrap();
        assert_eq!(
            form.fields[0].kind,
            FieldKind::SingleSelect {
                options: vec![
                    Choice {
                        value: "x".into(),
                        label: Some("Ex".into())
                    },
                    Choice {
                        value: "y".into(),
                        label: Some("Why".into())
                    }
                ]
            }
        );
    }

    #[test]
    fn integer_default_written_as_float_is_normalized() {
        let form = one(json!({"type": "integer", "default": 5.0})).unwrap();
        assert_eq!(form.fields[0].default, Some(json!(5)));
        assert!(form.fields[0].default.as_ref().unwrap().is_i64());
    }

    #[test]
    fn null_default_means_no_default() {
        let form = one(json!({"type": "string", "default": null})).unwrap();
        assert_eq!(form.fields[0].default, None);
    }

    #[test]
    fn missing_properties_is_an_empty_form() {
        let form = parse_form_schema(&json!({"type": "object"})).unwrap();
        assert!(form.fields.is_empty());
    }

    #[test]
    fn nested_object_names_its_property() {
        let e = err(
            json!({"type": "object", "properties": {"age": {"type": "object", "properties": {}}}}),
        );
        assert_eq!(e.path, "properties.age");
        assert_eq!(
            e.to_string(),
            "properties.age: nested objects are not supported"
        );
    }

    #[test]
    fn unknown_keyword_tolerated_but_pattern_rejected() {
        assert!(one(json!({"type": "string", "x-widget": "textarea", "$comment": "hi"})).is_ok());
        let e = one(json!({"type": "string", "pattern": "^a$"})).unwrap_err();
        assert_eq!(e.path, "properties.f.pattern");
        assert!(e.reason.contains("pattern is not supported"), "{e}");
    }

    #[test]
    fn property_level_required_true_is_explained() {
        let e = one(json!({"type": "string", "required": true})).unwrap_err();
        assert_eq!(e.path, "properties.f.required");
        assert!(e.reason.contains("top-level required"), "{e}");
    }

    #[test]
    fn malformed_annotation_caught_by_meta_schema() {
        let e = one(json!({"type": "string", "examples": 5})).unwrap_err();
        assert!(e.reason.contains("not valid JSON Schema"), "{e}");
        assert!(e.path.contains("examples"), "{e}");
    }

    #[test]
    fn default_outside_bounds_rejected_with_path() {
        let e = one(json!({"type": "integer", "maximum": 8, "default": 9})).unwrap_err();
        assert_eq!(e.path, "properties.f.default");
        assert!(e.reason.contains("Must be at most 8"), "{e}");
    }

    #[test]
    fn min_items_above_option_count_rejected() {
        let e = one(json!({"type": "array", "minItems": 3, "items": {"enum": ["a", "b"]}}))
            .unwrap_err();
        assert_eq!(e.path, "properties.f.minItems");
    }

    #[test]
    fn integer_range_without_whole_number_rejected() {
        assert!(one(json!({"type": "integer", "minimum": 0.2, "maximum": 0.8})).is_err());
        assert!(one(json!({"type": "number", "minimum": 0.2, "maximum": 0.8})).is_ok());
    }

    #[test]
    fn long_values_are_clipped_in_reasons() {
        let huge = "x".repeat(10_000);
        let e = one(json!({"type": {"x": huge.clone()}})).unwrap_err();
        assert!(e.reason.len() < 200, "{e}");
        let e = one(json!({"type": "string", "enum": ["a", {"k": huge.clone()}]})).unwrap_err();
        assert!(e.reason.len() < 200, "{e}");
        let e = one(json!({"type": "string", "examples": huge})).unwrap_err();
        assert!(e.reason.contains("not valid JSON Schema"), "{e}");
        assert!(e.reason.len() < 200, "{e}");
    }
}
