//! The schema matrix: every field kind of the 2025-11-25 elicitation subset with valid and
//! invalid answers, every out-of-subset schema refused with a path and reason, defaults, field
//! order, and hostile strings passing through as data.

use countersign_core::ask::schema::{
    Choice, FieldError, FieldKind, FormSchema, SchemaError, TextFormat, defaults,
    parse_form_schema, validate_answer,
};
use serde_json::{Map, Value, json};

/// A form with the single field `f` described by `prop`.
fn form_of(prop: Value, required: bool) -> Value {
    let mut raw = json!({"type": "object", "properties": {"f": prop}});
    if required {
        raw["required"] = json!(["f"]);
    }
    raw
}

fn judge(raw: &Value, content: &Value) -> Result<Map<String, Value>, Vec<FieldError>> {
    let form = parse_form_schema(raw).unwrap_or_else(|e| panic!("schema {raw} refused: {e}"));
    validate_answer(&form, raw, content)
}

/// What an answer to field `f` should get.
enum Expect {
    /// Accepted and sent exactly as given.
    Ok,
    /// Accepted, and sent as this value.
    OkAs(Value),
    /// Refused with exactly these messages on `f`.
    Err(&'static [&'static str]),
}
use Expect::*;

struct Case {
    prop: Value,
    required: bool,
    /// `None`: the field is left out of the answer.
    answer: Option<Value>,
    expect: Expect,
}

fn case(prop: Value, answer: Value, expect: Expect) -> Case {
    Case {
        prop,
        required: false,
        answer: Some(answer),
        expect,
    }
}

fn run(cases: Vec<Case>) {
    let mut failures = Vec::new();
    for (i, c) in cases.into_iter().enumerate() {
        let raw = form_of(c.prop.clone(), c.required);
        let content = match &c.answer {
            Some(v) => json!({"f": v}),
            None => json!({}),
        };
        let got = judge(&raw, &content);
        let ok = match (&c.expect, &got) {
            (Ok, Result::Ok(sent)) => Value::Object(sent.clone()) == content,
            (OkAs(v), Result::Ok(sent)) => sent.get("f") == Some(v) && sent.len() == 1,
            (Err(msgs), Result::Err(errs)) => {
                // Every error on `f`, and exactly these messages (in any order).
                let mut got: Vec<&str> = errs.iter().map(|e| e.message.as_str()).collect();
                let mut want = msgs.to_vec();
                got.sort_unstable();
                want.sort_unstable();
                errs.iter().all(|e| e.field == "f") && got == want
            }
            _ => false,
        };
        if !ok {
            failures.push(format!(
                "case {i}: schema {} answer {:?} -> {got:?}",
                c.prop, c.answer
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn text_fields() {
    let s = || json!({"type": "string"});
    let min3 = || json!({"type": "string", "minLength": 3});
    let max8 = || json!({"type": "string", "maxLength": 8});
    run(vec![
        case(s(), json!("hello"), Ok),
        case(s(), json!(""), Ok),
        case(s(), json!(5), Err(&["Must be text"])),
        case(s(), json!(true), Err(&["Must be text"])),
        case(s(), json!(null), Err(&["Must be text"])),
        case(s(), json!(["a"]), Err(&["Must be text"])),
        case(s(), json!({"a": 1}), Err(&["Must be text"])),
        case(min3(), json!("ab"), Err(&["Must be at least 3 characters"])),
        case(min3(), json!("abc"), Ok),
        // Lengths count code points, not bytes.
        case(min3(), json!("日本語"), Ok),
        case(
            max8(),
            json!("123456789"),
            Err(&["Must be at most 8 characters"]),
        ),
        case(max8(), json!("12345678"), Ok),
        case(max8(), json!("éééééééé"), Ok),
        case(max8(), json!("😀😀😀😀😀😀😀😀"), Ok),
        case(
            json!({"type": "string", "maxLength": 1}),
            json!("ab"),
            Err(&["Must be at most 1 character"]),
        ),
        case(
            json!({"type": "string", "minLength": 1}),
            json!(""),
            Err(&["Must be at least 1 character"]),
        ),
        Case {
            prop: s(),
            required: true,
            answer: None,
            expect: Err(&["Required"]),
        },
        // JSON Schema semantics: an empty string is present.
        Case {
            prop: s(),
            required: true,
            answer: Some(json!("")),
            expect: Ok,
        },
        Case {
            prop: s(),
            required: false,
            answer: None,
            expect: Ok,
        },
    ]);
}

#[test]
fn text_formats() {
    let f = |format: &str| json!({"type": "string", "format": format});
    const EMAIL: &[&str] = &["Must be an email address, like name@example.com"];
    const URI: &[&str] = &["Must be a full address with a scheme, like https://example.com"];
    const DATE: &[&str] = &["Must be a date, like 2025-11-25"];
    const DATE_TIME: &[&str] = &["Must be a date and time, like 2025-11-25T14:30:00Z"];
    run(vec![
        case(f("email"), json!("a@example.com"), Ok),
        case(f("email"), json!("first.last+tag@sub.example.org"), Ok),
        case(f("email"), json!("not-an-email"), Err(EMAIL)),
        case(f("email"), json!("a@"), Err(EMAIL)),
        case(f("email"), json!("@example.com"), Err(EMAIL)),
        case(f("email"), json!("a b@example.com"), Err(EMAIL)),
        case(f("uri"), json!("https://example.com/x?y=1#z"), Ok),
        case(f("uri"), json!("mailto:a@example.com"), Ok),
        case(f("uri"), json!("urn:isbn:0451450523"), Ok),
        case(f("uri"), json!("example.com"), Err(URI)),
        case(f("uri"), json!("/relative/path"), Err(URI)),
        case(f("uri"), json!("https://exa mple.com"), Err(URI)),
        case(f("uri"), json!(""), Err(URI)),
        case(f("date"), json!("2025-11-25"), Ok),
        case(f("date"), json!("2024-02-29"), Ok),
        case(f("date"), json!("2025-02-29"), Err(DATE)),
        case(f("date"), json!("2025-13-01"), Err(DATE)),
        case(f("date"), json!("25-11-2025"), Err(DATE)),
        case(f("date"), json!("2025-11-25T00:00:00Z"), Err(DATE)),
        case(f("date-time"), json!("2025-11-25T14:30:00Z"), Ok),
        case(f("date-time"), json!("2025-11-25T14:30:00.123+01:00"), Ok),
        case(f("date-time"), json!("2025-11-25"), Err(DATE_TIME)),
        case(
            f("date-time"),
            json!("2025-11-25T25:00:00Z"),
            Err(DATE_TIME),
        ),
        case(f("date-time"), json!("2025-11-25T14:30:00"), Err(DATE_TIME)),
        // A format never turns a non-string into an error other than the type.
        case(f("email"), json!(7), Err(&["Must be text"])),
        // Format and length together: both reported.
        case(
            json!({"type": "string", "format": "email", "maxLength": 5}),
            json!("toolong"),
            Err(&[
                "Must be an email address, like name@example.com",
                "Must be at most 5 characters",
            ]),
        ),
    ]);
}

#[test]
fn number_fields() {
    let n = || json!({"type": "number"});
    let i = || json!({"type": "integer"});
    let bounded = || json!({"type": "integer", "minimum": 1, "maximum": 8});
    run(vec![
        case(n(), json!(1.5), Ok),
        case(n(), json!(-3), Ok),
        case(n(), json!("1.5"), Err(&["Must be a number"])),
        case(n(), json!(true), Err(&["Must be a number"])),
        case(n(), json!(null), Err(&["Must be a number"])),
        case(i(), json!(3), Ok),
        case(i(), json!(3.5), Err(&["Must be a whole number"])),
        case(i(), json!("3"), Err(&["Must be a whole number"])),
        case(i(), json!(3.0), OkAs(json!(3))),
        case(bounded(), json!(0), Err(&["Must be at least 1"])),
        case(bounded(), json!(9), Err(&["Must be at most 8"])),
        case(bounded(), json!(1), Ok),
        case(bounded(), json!(8), Ok),
        case(
            bounded(),
            json!(8.5),
            Err(&["Must be a whole number", "Must be at most 8"]),
        ),
        case(
            json!({"type": "number", "maximum": 2.5}),
            json!(2.6),
            Err(&["Must be at most 2.5"]),
        ),
        case(json!({"type": "number", "maximum": 2.5}), json!(2.5), Ok),
        case(
            json!({"type": "number", "minimum": -10}),
            json!(-11),
            Err(&["Must be at least -10"]),
        ),
        Case {
            prop: i(),
            required: true,
            answer: None,
            expect: Err(&["Required"]),
        },
    ]);
}

#[test]
fn boolean_fields() {
    let b = || json!({"type": "boolean"});
    const TF: &[&str] = &["Must be true or false"];
    run(vec![
        case(b(), json!(true), Ok),
        case(b(), json!(false), Ok),
        case(b(), json!("true"), Err(TF)),
        case(b(), json!("false"), Err(TF)),
        case(b(), json!(1), Err(TF)),
        case(b(), json!(0), Err(TF)),
        case(b(), json!(null), Err(TF)),
        Case {
            prop: b(),
            required: true,
            answer: None,
            expect: Err(&["Required"]),
        },
    ]);
}

#[test]
fn single_select_fields() {
    let untitled = || json!({"type": "string", "enum": ["low", "mid", "high"]});
    let titled = || json!({"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]});
    let legacy = || json!({"type": "string", "enum": ["p1", "p2"], "enumNames": ["Cats", "Dogs"]});
    const ONE: &[&str] = &["Choose one of the options"];
    run(vec![
        case(untitled(), json!("mid"), Ok),
        case(untitled(), json!("MID"), Err(ONE)),
        case(untitled(), json!(""), Err(ONE)),
        case(untitled(), json!(1), Err(ONE)),
        case(untitled(), json!(["mid"]), Err(ONE)),
        case(titled(), json!("r"), Ok),
        case(titled(), json!("Red"), Err(ONE)),
        case(titled(), json!(null), Err(ONE)),
        case(legacy(), json!("p2"), Ok),
        case(legacy(), json!("Dogs"), Err(ONE)),
        Case {
            prop: titled(),
            required: true,
            answer: None,
            expect: Err(&["Required"]),
        },
    ]);
}

#[test]
fn multi_select_fields() {
    let untitled = || json!({"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string", "enum": ["a", "b", "c"]}});
    let titled = || json!({"type": "array", "items": {"anyOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]}});
    const ONLY: &[&str] = &["Choose only from the options"];
    run(vec![
        case(untitled(), json!(["a"]), Ok),
        case(untitled(), json!(["c", "a"]), Ok),
        case(untitled(), json!([]), Err(&["Choose at least 1"])),
        case(
            untitled(),
            json!(["a", "b", "c"]),
            Err(&["Choose at most 2"]),
        ),
        case(
            untitled(),
            json!(["a", "a"]),
            Err(&["Choose each option only once"]),
        ),
        case(untitled(), json!(["a", "z"]), Err(ONLY)),
        case(untitled(), json!([1]), Err(ONLY)),
        case(untitled(), json!("a"), Err(&["Must be a list of choices"])),
        case(untitled(), json!(null), Err(&["Must be a list of choices"])),
        case(titled(), json!([]), Ok),
        case(titled(), json!(["r", "g"]), Ok),
        case(titled(), json!(["Red"]), Err(ONLY)),
        case(
            titled(),
            json!(["r", "r"]),
            Err(&["Choose each option only once"]),
        ),
        Case {
            prop: untitled(),
            required: true,
            answer: None,
            expect: Err(&["Required"]),
        },
    ]);
}

#[test]
fn answer_as_a_whole() {
    let raw = json!({
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "boolean"}},
        "required": ["a", "b"]
    });
    for content in [json!(null), json!("x"), json!(1), json!(["a"]), json!(true)] {
        let errs = judge(&raw, &content).unwrap_err();
        assert_eq!(errs.len(), 1, "{content}");
        assert_eq!(errs[0].field, "", "{content}");
    }
    // Unknown keys are refused at form level, never dropped quietly.
    let errs = judge(&raw, &json!({"a": "x", "b": true, "admin": true})).unwrap_err();
    assert_eq!(
        errs,
        vec![FieldError {
            field: "".into(),
            message: "\"admin\" is not a field of this form".into()
        }]
    );
    // Every problem at once, form-level first, then in field order.
    let errs = judge(&raw, &json!({"b": "yes", "zzz": 1})).unwrap_err();
    let pairs: Vec<(&str, &str)> = errs
        .iter()
        .map(|e| (e.field.as_str(), e.message.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("", "\"zzz\" is not a field of this form"),
            ("a", "Required"),
            ("b", "Must be true or false")
        ]
    );
    // An empty form accepts only an empty answer.
    let empty = json!({"type": "object", "properties": {}});
    assert_eq!(judge(&empty, &json!({})).unwrap(), Map::new());
    assert!(judge(&empty, &json!({"x": 1})).is_err());
}

/// A form like the one the reference "everything" server sends, with every kind.
fn every_kind() -> Value {
    json!({
        "type": "object",
        "properties": {
            "fullName": {"type": "string", "title": "Name", "description": "Your legal name"},
            "agree": {"type": "boolean", "title": "Agree"},
            "motto": {"type": "string", "default": "Carpe diem"},
            "contact": {"type": "string", "format": "email"},
            "site": {"type": "string", "format": "uri"},
            "born": {"type": "string", "format": "date"},
            "meet": {"type": "string", "format": "date-time", "default": "2025-11-25T09:00:00Z"},
            "lucky": {"type": "integer", "minimum": 1, "maximum": 100, "default": 7},
            "ratio": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.5},
            "subscribe": {"type": "boolean", "default": true},
            "size": {"type": "string", "enum": ["S", "M", "L"], "default": "M"},
            "hero": {"type": "string", "oneOf": [{"const": "h1", "title": "Hawk"}, {"const": "h2", "title": "Owl"}], "default": "h2"},
            "pet": {"type": "string", "enum": ["p1", "p2"], "enumNames": ["Cat", "Dog"], "default": "p1"},
            "tools": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string", "enum": ["saw", "drill", "vise"]}, "default": ["saw"]},
            "fish": {"type": "array", "items": {"anyOf": [{"const": "f1", "title": "Tuna"}, {"const": "f2", "title": "Cod"}]}, "default": ["f1", "f2"]}
        },
        "required": ["fullName"]
    })
}

#[test]
fn field_order_is_preserved() {
    let form = parse_form_schema(&every_kind()).unwrap();
    let names: Vec<&str> = form.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "fullName",
            "agree",
            "motto",
            "contact",
            "site",
            "born",
            "meet",
            "lucky",
            "ratio",
            "subscribe",
            "size",
            "hero",
            "pet",
            "tools",
            "fish"
        ]
    );
    // Not alphabetical, not reversed: a second, reversed schema comes out reversed.
    let raw = json!({"type": "object", "properties": {"zeta": {"type": "string"}, "alpha": {"type": "string"}, "mid": {"type": "string"}}});
    let form = parse_form_schema(&raw).unwrap();
    let names: Vec<&str> = form.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["zeta", "alpha", "mid"]);
    // And the serialized form keeps that order for the UI.
    let json = serde_json::to_value(&form).unwrap();
    let names: Vec<&str> = json["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["zeta", "alpha", "mid"]);
}

#[test]
fn every_kind_parses_to_the_right_model() {
    let form = parse_form_schema(&every_kind()).unwrap();
    let by = |name: &str| form.fields.iter().find(|f| f.name == name).unwrap();
    assert!(by("fullName").required);
    assert!(form.fields.iter().filter(|f| f.required).count() == 1);
    assert_eq!(by("fullName").title.as_deref(), Some("Name"));
    assert_eq!(
        by("fullName").description.as_deref(),
        Some("Your legal name")
    );
    assert_eq!(
        by("site").kind,
        FieldKind::Text {
            min_length: None,
            max_length: None,
            format: Some(TextFormat::Uri)
        }
    );
    assert_eq!(
        by("meet").kind,
        FieldKind::Text {
            min_length: None,
            max_length: None,
            format: Some(TextFormat::DateTime)
        }
    );
    assert_eq!(
        by("ratio").kind,
        FieldKind::Number {
            integer: false,
            minimum: Some(0.0),
            maximum: Some(1.0)
        }
    );
    let c = |v: &str, l: Option<&str>| Choice {
        value: v.into(),
        label: l.map(Into::into),
    };
    assert_eq!(
        by("size").kind,
        FieldKind::SingleSelect {
            options: vec![c("S", None), c("M", None), c("L", None)]
        }
    );
    assert_eq!(
        by("hero").kind,
        FieldKind::SingleSelect {
            options: vec![c("h1", Some("Hawk")), c("h2", Some("Owl"))]
        }
    );
    assert_eq!(
        by("pet").kind,
        FieldKind::SingleSelect {
            options: vec![c("p1", Some("Cat")), c("p2", Some("Dog"))]
        }
    );
    assert_eq!(
        by("tools").kind,
        FieldKind::MultiSelect {
            options: vec![c("saw", None), c("drill", None), c("vise", None)],
            min_items: Some(1),
            max_items: Some(2)
        }
    );
    assert_eq!(
        by("fish").kind,
        FieldKind::MultiSelect {
            options: vec![c("f1", Some("Tuna")), c("f2", Some("Cod"))],
            min_items: None,
            max_items: None
        }
    );
    // The model survives a trip to the UI and back.
    let back: FormSchema = serde_json::from_value(serde_json::to_value(&form).unwrap()).unwrap();
    assert_eq!(back, form);
}

#[test]
fn defaults_are_the_untouched_form() {
    let raw = every_kind();
    let form = parse_form_schema(&raw).unwrap();
    let d = defaults(&form);
    assert_eq!(
        Value::Object(d.clone()),
        json!({
            "motto": "Carpe diem",
            "meet": "2025-11-25T09:00:00Z",
            "lucky": 7,
            "ratio": 0.5,
            "subscribe": true,
            "size": "M",
            "hero": "h2",
            "pet": "p1",
            "tools": ["saw"],
            "fish": ["f1", "f2"]
        })
    );
    // In field order.
    assert_eq!(
        d.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "motto",
            "meet",
            "lucky",
            "ratio",
            "subscribe",
            "size",
            "hero",
            "pet",
            "tools",
            "fish"
        ]
    );
    // A person who presses Submit on the untouched form is told only about the required field
    // that has no default.
    let errs = validate_answer(&form, &raw, &Value::Object(d.clone())).unwrap_err();
    assert_eq!(
        errs,
        vec![FieldError {
            field: "fullName".into(),
            message: "Required".into()
        }]
    );
    // Filling it in is enough; what is sent is the defaults plus that answer.
    let mut filled = d.clone();
    filled.insert("fullName".into(), json!("Ada"));
    let sent = validate_answer(&form, &raw, &Value::Object(filled)).unwrap();
    assert_eq!(sent["fullName"], json!("Ada"));
    assert_eq!(sent.len(), d.len() + 1);
    for (k, v) in &d {
        assert_eq!(&sent[k], v, "{k}");
    }
}

#[test]
fn no_defaults_means_empty_content() {
    let raw = json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "boolean"}}});
    let form = parse_form_schema(&raw).unwrap();
    let d = defaults(&form);
    assert!(d.is_empty());
    assert_eq!(
        validate_answer(&form, &raw, &Value::Object(d)).unwrap(),
        Map::new()
    );
}

#[test]
fn integer_default_written_as_float_is_sent_as_integer() {
    let raw = form_of(json!({"type": "integer", "default": 4.0}), false);
    let form = parse_form_schema(&raw).unwrap();
    let d = defaults(&form);
    assert!(d["f"].is_i64());
    let sent = validate_answer(&form, &raw, &Value::Object(d)).unwrap();
    assert!(sent["f"].is_i64());
}

const HOSTILE: &[&str] = &[
    "<img src=x onerror=alert(1)>",
    "<script>alert(document.cookie)</script>",
    "\u{202E}gnp.exe",
    "'; DROP TABLE asks; --",
    "{{constructor.constructor('alert(1)')()}}",
    "line\nbreak\u{0000}nul",
    "javascript:alert(1)",
];

#[test]
fn hostile_strings_are_plain_data() {
    for &h in HOSTILE {
        // As an answer: accepted and sent byte for byte.
        let raw = form_of(json!({"type": "string"}), true);
        let sent = judge(&raw, &json!({"f": h})).unwrap();
        assert_eq!(sent["f"], json!(h));

        // As every piece of text a server controls: carried into the model untouched.
        let raw = json!({
            "type": "object",
            "properties": {
                h: {"type": "string", "title": h, "description": h, "default": h},
                "pick": {"type": "string", "oneOf": [{"const": h, "title": h}, {"const": "other", "title": "Other"}], "default": h},
                "legacy": {"type": "string", "enum": [h], "enumNames": [h]},
                "many": {"type": "array", "items": {"anyOf": [{"const": h, "title": h}]}, "default": [h]}
            },
            "required": [h]
        });
        let form = parse_form_schema(&raw).unwrap_or_else(|e| panic!("{h:?}: {e}"));
        let f = &form.fields[0];
        assert_eq!(f.name, h);
        assert_eq!(f.title.as_deref(), Some(h));
        assert_eq!(f.description.as_deref(), Some(h));
        assert_eq!(f.default, Some(json!(h)));
        assert!(f.required);
        assert_eq!(
            form.fields[1].kind,
            FieldKind::SingleSelect {
                options: vec![
                    Choice {
                        value: h.into(),
                        label: Some(h.into())
                    },
                    Choice {
                        value: "other".into(),
                        label: Some("Other".into())
                    }
                ]
            }
        );
        assert_eq!(
            form.fields[2].kind,
            FieldKind::SingleSelect {
                options: vec![Choice {
                    value: h.into(),
                    label: Some(h.into())
                }]
            }
        );
        let d = defaults(&form);
        let sent = validate_answer(&form, &raw, &Value::Object(d)).unwrap();
        assert_eq!(sent[h], json!(h));
        assert_eq!(sent["pick"], json!(h));
        assert_eq!(sent["many"], json!([h]));
        // Serialized for the UI, the text is still the same text (escaping is the UI's job).
        let ui = serde_json::to_value(&form).unwrap();
        assert_eq!(ui["fields"][0]["title"], json!(h));
    }
}

#[test]
fn hostile_field_name_in_errors_is_the_name() {
    let h = "<img src=x onerror=alert(1)>";
    let raw = json!({"type": "object", "properties": {h: {"type": "boolean"}}, "required": [h]});
    assert_eq!(
        judge(&raw, &json!({})).unwrap_err(),
        vec![FieldError {
            field: h.into(),
            message: "Required".into()
        }]
    );
    assert_eq!(
        judge(&raw, &json!({h: "yes"})).unwrap_err(),
        vec![FieldError {
            field: h.into(),
            message: "Must be true or false".into()
        }]
    );
}

/// Schemas outside the subset: (schema, expected path, a phrase the reason must contain).
fn rejected() -> Vec<(Value, &'static str, &'static str)> {
    let p = |prop: Value| form_of(prop, false);
    vec![
        // The schema as a whole.
        (json!([]), "", "must be a JSON object"),
        (json!("object"), "", "must be a JSON object"),
        (json!({"properties": {}}), "type", "must be \"object\""),
        (
            json!({"type": "array", "items": {"type": "string"}}),
            "type",
            "must be \"object\"",
        ),
        (
            json!({"type": ["object", "null"], "properties": {}}),
            "type",
            "must be \"object\"",
        ),
        (
            json!({"type": "object", "properties": []}),
            "properties",
            "must be an object",
        ),
        (
            json!({"type": "object", "$schema": 7, "properties": {}}),
            "$schema",
            "must be a string",
        ),
        (
            json!({"type": "object", "properties": {}, "allOf": [{}]}),
            "allOf",
            "not supported",
        ),
        (
            json!({"type": "object", "properties": {}, "$ref": "#/$defs/x"}),
            "$ref",
            "references",
        ),
        (
            json!({"type": "object", "properties": {}, "$defs": {"x": {"type": "string"}}}),
            "$defs",
            "definitions",
        ),
        (
            json!({"type": "object", "properties": {}, "additionalProperties": {"type": "string"}}),
            "additionalProperties",
            "not supported",
        ),
        (
            json!({"type": "object", "properties": {}, "patternProperties": {"^x": {}}}),
            "patternProperties",
            "not supported",
        ),
        (
            json!({"type": "object", "properties": {}, "minProperties": 1}),
            "minProperties",
            "not supported",
        ),
        (
            json!({"type": "object", "properties": {}, "if": {}, "then": {}}),
            "if",
            "not supported",
        ),
        // required.
        (
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": "a"}),
            "required",
            "list of field names",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": [1]}),
            "required[0]",
            "field name",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "b"]}),
            "required[1]",
            "\"b\", which is not one of the properties",
        ),
        // A field's type.
        (
            p(json!({"type": "object", "properties": {"x": {"type": "string"}}})),
            "properties.f",
            "nested objects are not supported",
        ),
        (
            p(json!({"title": "No type"})),
            "properties.f",
            "no \"type\"",
        ),
        (
            p(json!({"type": ["string", "null"]})),
            "properties.f",
            "type unions are not supported",
        ),
        (
            p(json!({"type": "null"})),
            "properties.f",
            "null fields are not supported",
        ),
        (
            p(json!({"type": "date"})),
            "properties.f",
            "unknown type \"date\"",
        ),
        (
            p(json!({"type": 5})),
            "properties.f.type",
            "must be a type name",
        ),
        (p(json!(true)), "properties.f", "must be a JSON object"),
        (p(json!("string")), "properties.f", "must be a JSON object"),
        (
            p(json!({"$ref": "#/$defs/Color"})),
            "properties.f",
            "no \"type\"",
        ),
        (
            p(json!({"type": "string", "$ref": "#/$defs/Color"})),
            "properties.f.$ref",
            "references",
        ),
        (
            json!({"type": "object", "properties": {"": {"type": "string"}}}),
            "properties.",
            "must not be empty",
        ),
        // Arrays other than string choices.
        (
            p(json!({"type": "array", "items": {"type": "number", "enum": [1, 2]}})),
            "properties.f.items",
            "arrays of number are not supported",
        ),
        (
            p(json!({"type": "array", "items": {"type": "integer"}})),
            "properties.f.items",
            "arrays of integer are not supported",
        ),
        (
            p(json!({"type": "array", "items": {"type": "object"}})),
            "properties.f.items",
            "arrays of objects are not supported",
        ),
        (
            p(json!({"type": "array", "items": {"type": "array"}})),
            "properties.f.items",
            "nested arrays",
        ),
        (
            p(json!({"type": "array", "items": {"type": "string"}})),
            "properties.f.items",
            "free-form lists are not supported",
        ),
        (p(json!({"type": "array"})), "properties.f", "needs items"),
        (
            p(json!({"type": "array", "items": [{"type": "string"}]})),
            "properties.f.items",
            "must be a schema object",
        ),
        (
            p(json!({"type": "array", "items": {"type": ["string"], "enum": ["a"]}})),
            "properties.f.items",
            "type unions",
        ),
        (
            p(json!({"type": "array", "items": {"enum": ["a"], "anyOf": [{"const": "a"}]}})),
            "properties.f.items",
            "not both",
        ),
        (
            p(json!({"type": "array", "items": {"oneOf": [{"const": "a"}]}})),
            "properties.f.items",
            "free-form",
        ),
        (
            p(json!({"type": "array", "items": {"enum": ["a"], "pattern": "a"}})),
            "properties.f.items.pattern",
            "not supported",
        ),
        (
            p(json!({"type": "array", "items": {"enum": ["a"]}, "contains": {"const": "a"}})),
            "properties.f.contains",
            "not supported",
        ),
        // Formats and string keywords.
        (
            p(json!({"type": "string", "format": "ipv4"})),
            "properties.f.format",
            "format \"ipv4\" is not supported",
        ),
        (
            p(json!({"type": "string", "format": "uuid"})),
            "properties.f.format",
            "not supported",
        ),
        (
            p(json!({"type": "string", "format": 1})),
            "properties.f.format",
            "must be a string",
        ),
        (
            p(json!({"type": "string", "pattern": "^a"})),
            "properties.f.pattern",
            "pattern is not supported",
        ),
        (
            p(json!({"type": "string", "const": "a"})),
            "properties.f.const",
            "not supported",
        ),
        (
            p(json!({"type": "string", "anyOf": [{"const": "a"}]})),
            "properties.f.anyOf",
            "not supported",
        ),
        (
            p(json!({"type": "string", "allOf": [{"minLength": 1}]})),
            "properties.f.allOf",
            "not supported",
        ),
        (
            p(json!({"type": "string", "not": {"const": "x"}})),
            "properties.f.not",
            "not supported",
        ),
        (
            p(json!({"type": "string", "minimum": 1})),
            "properties.f.minimum",
            "not supported on a text field",
        ),
        (
            p(json!({"type": "string", "required": true})),
            "properties.f.required",
            "top-level required",
        ),
        (
            p(json!({"type": "string", "minLength": -1})),
            "properties.f.minLength",
            "non-negative whole number",
        ),
        (
            p(json!({"type": "string", "maxLength": 1.5})),
            "properties.f.maxLength",
            "non-negative whole number",
        ),
        (
            p(json!({"type": "string", "maxLength": "8"})),
            "properties.f.maxLength",
            "non-negative whole number",
        ),
        (
            p(json!({"type": "string", "minLength": 5, "maxLength": 2})),
            "properties.f",
            "minLength (5) is greater than maxLength (2)",
        ),
        (
            p(json!({"type": "string", "title": 5})),
            "properties.f.title",
            "must be a string",
        ),
        (
            p(json!({"type": "string", "description": ["x"]})),
            "properties.f.description",
            "must be a string",
        ),
        (
            p(json!({"type": "string", "examples": "x"})),
            "properties.f.examples",
            "not valid JSON Schema",
        ),
        // Numbers.
        (
            p(json!({"type": "number", "exclusiveMinimum": 0})),
            "properties.f.exclusiveMinimum",
            "not supported on a number field",
        ),
        (
            p(json!({"type": "integer", "multipleOf": 5})),
            "properties.f.multipleOf",
            "not supported on an integer field",
        ),
        (
            p(json!({"type": "integer", "enum": [1, 2]})),
            "properties.f.enum",
            "not supported on an integer field",
        ),
        (
            p(json!({"type": "number", "minimum": "0"})),
            "properties.f.minimum",
            "must be a number",
        ),
        (
            p(json!({"type": "number", "minimum": 10, "maximum": 1})),
            "properties.f",
            "minimum (10) is greater than maximum (1)",
        ),
        (
            p(json!({"type": "integer", "minimum": 1.2, "maximum": 1.8})),
            "properties.f",
            "no whole number",
        ),
        (
            p(json!({"type": "number", "format": "float"})),
            "properties.f.format",
            "not supported on a number field",
        ),
        (
            p(json!({"type": "boolean", "const": true})),
            "properties.f.const",
            "not supported on a boolean field",
        ),
        // Selects.
        (
            p(json!({"type": "string", "enum": [1, 2]})),
            "properties.f.enum[0]",
            "choice values must be strings",
        ),
        (
            p(json!({"type": "string", "enum": ["a", null]})),
            "properties.f.enum[1]",
            "choice values must be strings",
        ),
        (
            p(json!({"type": "string", "enum": []})),
            "properties.f.enum",
            "at least one choice",
        ),
        (
            p(json!({"type": "string", "enum": "a"})),
            "properties.f.enum",
            "list of strings",
        ),
        (
            p(json!({"type": "string", "enum": ["a", "a"]})),
            "properties.f.enum[1]",
            "listed twice",
        ),
        (
            p(json!({"type": "string", "enum": ["a", "b"], "enumNames": ["A"]})),
            "properties.f.enumNames",
            "1 names for 2 enum values",
        ),
        (
            p(json!({"type": "string", "enum": ["a"], "enumNames": [1]})),
            "properties.f.enumNames",
            "list of strings",
        ),
        (
            p(json!({"type": "string", "enum": ["a"], "oneOf": [{"const": "a"}]})),
            "properties.f",
            "not both",
        ),
        (
            p(json!({"type": "string", "oneOf": [{"const": "a"}], "enumNames": ["A"]})),
            "properties.f.enumNames",
            "only goes with enum",
        ),
        (
            p(json!({"type": "string", "enum": ["a"], "maxLength": 3})),
            "properties.f.maxLength",
            "not supported on a single-choice field",
        ),
        (
            p(json!({"type": "string", "enum": ["a"], "format": "email"})),
            "properties.f.format",
            "not supported on a single-choice field",
        ),
        (
            p(json!({"type": "string", "oneOf": []})),
            "properties.f.oneOf",
            "at least one choice",
        ),
        (
            p(json!({"type": "string", "oneOf": [{"title": "A"}]})),
            "properties.f.oneOf[0]",
            "needs a \"const\"",
        ),
        (
            p(json!({"type": "string", "oneOf": [{"const": 1, "title": "One"}]})),
            "properties.f.oneOf[0].const",
            "choice values must be strings",
        ),
        (
            p(json!({"type": "string", "oneOf": [{"const": "a"}, {"const": "a"}]})),
            "properties.f.oneOf[1].const",
            "listed twice",
        ),
        (
            p(json!({"type": "string", "oneOf": ["a"]})),
            "properties.f.oneOf[0]",
            "must be a {const, title} object",
        ),
        (
            p(json!({"type": "string", "oneOf": [{"const": "a", "title": 1}]})),
            "properties.f.oneOf[0].title",
            "must be a string",
        ),
        (
            p(json!({"type": "string", "oneOf": [{"const": "a", "type": "number"}]})),
            "properties.f.oneOf[0].type",
            "only be of type \"string\"",
        ),
        (
            p(json!({"type": "string", "oneOf": [{"const": "a", "pattern": "a"}]})),
            "properties.f.oneOf[0].pattern",
            "not supported in a choice",
        ),
        (
            p(json!({"type": "array", "items": {"anyOf": [{"const": "a"}, {"const": "a"}]}})),
            "properties.f.items.anyOf[1].const",
            "listed twice",
        ),
        (
            p(json!({"type": "array", "items": {"enum": []}})),
            "properties.f.items.enum",
            "at least one choice",
        ),
        (
            p(
                json!({"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 2, "maxItems": 1}),
            ),
            "properties.f",
            "minItems (2) is greater than maxItems (1)",
        ),
        (
            p(json!({"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 3})),
            "properties.f.minItems",
            "only 2 exist",
        ),
        (
            p(json!({"type": "array", "items": {"enum": ["a"]}, "maxItems": -1})),
            "properties.f.maxItems",
            "non-negative whole number",
        ),
        (
            p(json!({"type": "array", "items": {"enum": ["a"]}, "uniqueItems": "yes"})),
            "properties.f.uniqueItems",
            "true or false",
        ),
        // Defaults that are not valid answers for their own field.
        (
            p(json!({"type": "string", "maxLength": 3, "default": "abcd"})),
            "properties.f.default",
            "Must be at most 3 characters",
        ),
        (
            p(json!({"type": "string", "format": "email", "default": "nobody"})),
            "properties.f.default",
            "Must be an email address",
        ),
        (
            p(json!({"type": "string", "default": 5})),
            "properties.f.default",
            "Must be text",
        ),
        (
            p(json!({"type": "boolean", "default": "yes"})),
            "properties.f.default",
            "Must be true or false",
        ),
        (
            p(json!({"type": "integer", "default": 1.5})),
            "properties.f.default",
            "Must be a whole number",
        ),
        (
            p(json!({"type": "number", "minimum": 0, "default": -1})),
            "properties.f.default",
            "Must be at least 0",
        ),
        (
            p(json!({"type": "string", "enum": ["a", "b"], "default": "c"})),
            "properties.f.default",
            "Choose one of the options",
        ),
        (
            p(json!({"type": "string", "oneOf": [{"const": "a", "title": "A"}], "default": "A"})),
            "properties.f.default",
            "Choose one of the options",
        ),
        (
            p(json!({"type": "array", "items": {"enum": ["a", "b"]}, "default": "a"})),
            "properties.f.default",
            "Must be a list of choices",
        ),
        (
            p(json!({"type": "array", "items": {"enum": ["a", "b"]}, "default": ["c"]})),
            "properties.f.default",
            "Choose only from the options",
        ),
        (
            p(
                json!({"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 1, "default": ["a", "b"]}),
            ),
            "properties.f.default",
            "Choose at most 1",
        ),
        (
            p(json!({"type": "array", "items": {"enum": ["a", "b"]}, "default": ["a", "a"]})),
            "properties.f.default",
            "Choose each option only once",
        ),
    ]
}

#[test]
fn out_of_subset_schemas_are_rejected_with_path_and_reason() {
    let mut failures = Vec::new();
    for (raw, path, phrase) in rejected() {
        match parse_form_schema(&raw) {
            Result::Ok(form) => failures.push(format!("{raw}: accepted as {form:?}")),
            Result::Err(SchemaError {
                path: got_path,
                reason,
            }) => {
                if got_path != path || !reason.contains(phrase) {
                    failures.push(format!(
                        "{raw}: got {got_path:?}: {reason:?}; want {path:?} containing {phrase:?}"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn schema_error_text_is_ready_for_json_rpc() {
    let raw = json!({"type": "object", "properties": {"age": {"type": "object"}}});
    let err = parse_form_schema(&raw).unwrap_err();
    assert_eq!(
        err.to_string(),
        "properties.age: nested objects are not supported"
    );
    let err = parse_form_schema(&json!(null)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the requested schema must be a JSON object"
    );
}

#[test]
fn tolerated_variations_parse() {
    let ok = [
        // Annotations and extensions anywhere.
        json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {}}),
        json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "urn:x", "title": "T", "description": "D", "$comment": "c", "type": "object", "properties": {"a": {"type": "string"}}}),
        json!({"type": "object", "properties": {"a": {"type": "string", "x-widget": "textarea", "examples": ["x"], "deprecated": false, "readOnly": false}}}),
        json!({"type": "object", "properties": {"a": {"type": "string", "contentMediaType": "text/plain"}}}),
        json!({"type": "object", "x-vendor": {"anything": [1, 2]}, "properties": {}}),
        // No properties at all: a plain confirmation.
        json!({"type": "object"}),
        json!({"type": "object", "required": []}),
        // additionalProperties as a boolean.
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
        json!({"type": "object", "properties": {}, "additionalProperties": true}),
        // Duplicated required entry.
        json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "a"]}),
        // Integral floats as counts.
        json!({"type": "object", "properties": {"a": {"type": "string", "maxLength": 8.0}}}),
        // Choices: no title, type beside const, type beside anyOf, no items.type beside enum.
        json!({"type": "object", "properties": {"a": {"type": "string", "oneOf": [{"const": "x"}]}}}),
        json!({"type": "object", "properties": {"a": {"type": "string", "oneOf": [{"const": "x", "title": "X", "type": "string"}]}}}),
        json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string", "anyOf": [{"const": "x", "title": "X"}]}}}}),
        json!({"type": "object", "properties": {"a": {"type": "array", "items": {"enum": ["x"]}}}}),
        json!({"type": "object", "properties": {"a": {"type": "array", "uniqueItems": true, "items": {"enum": ["x"]}}}}),
        // A default of null is no default.
        json!({"type": "object", "properties": {"a": {"type": "boolean", "default": null}}}),
        // Bounds that are met exactly.
        json!({"type": "object", "properties": {"a": {"type": "string", "minLength": 3, "maxLength": 3}}}),
        json!({"type": "object", "properties": {"a": {"type": "array", "items": {"enum": ["x", "y"]}, "minItems": 2}}}),
        json!({"type": "object", "properties": {"a": {"type": "integer", "minimum": 0.5, "maximum": 1.5}}}),
    ];
    for raw in ok {
        if let Result::Err(e) = parse_form_schema(&raw) {
            panic!("{raw} refused: {e}");
        }
    }
    // An untitled oneOf choice has no label; the UI shows its value.
    let form = parse_form_schema(&json!({"type": "object", "properties": {"a": {"type": "string", "oneOf": [{"const": "x"}]}}})).unwrap();
    assert_eq!(
        form.fields[0].kind,
        FieldKind::SingleSelect {
            options: vec![Choice {
                value: "x".into(),
                label: None
            }]
        }
    );
}

#[test]
fn validation_uses_2020_12_whatever_schema_uri_is_sent() {
    // Draft 4 would treat `exclusiveMaximum: true` differently; such keywords are refused
    // anyway, and the subset's keywords behave the same: a stray $schema changes nothing.
    for uri in [
        "http://json-schema.org/draft-04/schema#",
        "http://json-schema.org/draft-07/schema#",
        "https://example.com/not-a-meta-schema",
    ] {
        let raw = json!({"$schema": uri, "type": "object",
            "properties": {"d": {"type": "string", "format": "date"}, "n": {"type": "integer", "maximum": 3}}});
        let errs = judge(&raw, &json!({"d": "tomorrow", "n": 4})).unwrap_err();
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["d", "n"], "{uri}");
    }
}
