//! Reading a document: each path item and operation checked, its
//! parameters, body and responses turned into a tool's schemas, `$ref`s
//! inlined within the caps.

use super::*;

/// The parameters one `parameters` list declares, each with the pointer
/// to where it is declared.
#[derive(Clone, Default)]
struct Declared {
    parameters: Vec<(ApiParameter, String)>,
    unusable: Option<String>,
}

/// One declared parameter, as hane takes it.
enum Declaration {
    /// Sent, unless `unusable` says why it cannot be.
    Kept(ApiParameter, Option<String>),
    /// Left out: a header OpenAPI says to ignore, an optional cookie.
    Ignored,
    /// A required cookie.
    Unusable(String),
}

/// Walks one parsed document.
pub(super) struct Reader<'a> {
    root: &'a Value,
    /// 3.0: `nullable`, boolean `exclusiveMinimum`, `$ref` siblings ignored.
    v30: bool,
    total_bytes: u64,
    schema_bytes: u64,
    /// Where the schema being resolved starts, to name it when too large.
    schema_at: String,
}

impl<'a> Reader<'a> {
    /// A reader of the document `root`.
    pub(super) fn new(root: &'a Value) -> Self {
        Self {
            root,
            v30: false,
            total_bytes: 0,
            schema_bytes: 0,
            schema_at: String::new(),
        }
    }

    pub(super) fn document(&mut self) -> Result<ApiDocument, (Option<String>, Fault)> {
        let top = |fault| (None, fault);
        let root = object(self.root, "", "an OpenAPI document").map_err(top)?;
        let openapi = match root.get("openapi") {
            Some(Value::String(v)) if supported_version(v) => v.clone(),
            Some(Value::String(v)) => {
                let message = format!("OpenAPI {v} is not supported: expected 3.0.x or 3.1.x");
                return Err(top(fault("/openapi", message)));
            }
            Some(other) => {
                let message = format!(
                    "`openapi` must be a version string such as \"3.1.0\", found {}",
                    kind(other)
                );
                return Err(top(fault("/openapi", message)));
            }
            None => {
                let message = match root.get("swagger") {
                    Some(Value::String(v)) => format!(
                        "Swagger {v} (OpenAPI 2) is not supported: expected an OpenAPI 3.0.x or 3.1.x document"
                    ),
                    Some(_) => "Swagger (OpenAPI 2) is not supported: expected an OpenAPI 3.0.x or 3.1.x document".to_owned(),
                    None => {
                        let message = "missing `openapi`: expected an OpenAPI 3.0.x or 3.1.x document";
                        return Err(top(fault("", message)));
                    }
                };
                return Err(top(fault("/swagger", message)));
            }
        };
        self.v30 = openapi.starts_with("3.0.");
        let info = root.get("info").ok_or_else(|| {
            top(fault(
                "",
                "missing `info`, with the API's `title` and `version`",
            ))
        })?;
        let info = object(info, "/info", "`info`").map_err(top)?;
        let title = optional_string(info, "title", "/info")
            .map_err(top)?
            .ok_or_else(|| top(fault("/info", "missing `title`")))?;
        let version = match info.get("version") {
            Some(Value::String(v)) => v.clone(),
            Some(Value::Number(n)) => n.to_string(),
            Some(other) => {
                let message = format!("`version` must be a string, found {}", kind(other));
                return Err(top(fault("/info/version", message)));
            }
            None => return Err(top(fault("/info", "missing `version`"))),
        };

        let mut document = ApiDocument {
            openapi,
            title,
            version,
            operations: Vec::new(),
            unusable: Vec::new(),
        };
        let paths = match root.get("paths") {
            None => return Ok(document),
            Some(paths) => object(paths, "/paths", "`paths`").map_err(top)?,
        };
        let mut ids: HashMap<&'a str, String> = HashMap::new();
        for (path, item) in paths {
            if path.starts_with("x-") {
                continue;
            }
            let item_at = child("/paths", path);
            if !path.starts_with('/') {
                return Err(top(fault(
                    item_at,
                    format!("the path `{path}` must start with `/`"),
                )));
            }
            let variables = template_variables(path).map_err(|m| top(fault(&item_at, m)))?;
            let (item, item_target, _) = self.deref(item, &item_at).map_err(top)?;
            let item = object(item, &item_target, "a path item").map_err(top)?;
            let shared = self
                .parameter_list(item.get("parameters"), &item_target)
                .map_err(top)?;
            for (key, method) in METHODS {
                let Some(operation) = item.get(key) else {
                    continue;
                };
                let at = child(&item_target, key);
                let operation = object(operation, &at, "an operation").map_err(top)?;
                let operation_id = match operation.get("operationId") {
                    None => None,
                    Some(Value::String(id)) => Some(id.as_str()),
                    Some(other) => {
                        let message =
                            format!("`operationId` must be a string, found {}", kind(other));
                        return Err(top(fault(child(&at, "operationId"), message)));
                    }
                };
                let name = operation_name(operation_id, method, path);
                if let Some(id) = operation_id {
                    if let Some(first) = ids.get(id) {
                        let message = format!("operationId `{id}` is already used at {first}");
                        return Err((Some(name), fault(child(&at, "operationId"), message)));
                    }
                    ids.insert(id, at.clone());
                }
                let unusable = |reason: String| ApiUnusable {
                    operation_id: operation_id.map(str::to_owned),
                    method: method.to_owned(),
                    path: path.clone(),
                    reason,
                };
                if method == "TRACE" {
                    let reason = "TRACE operations are not offered as tools".to_owned();
                    document.unusable.push(unusable(reason));
                    continue;
                }
                let checked =
                    match self.operation(path, &variables, &shared, method, operation, &at) {
                        Ok(checked) => checked,
                        Err(fault) if fault.unsupported => {
                            Err(format!("{} (at {})", fault.message, fault.pointer))
                        }
                        Err(fault) => return Err((Some(name.clone()), fault)),
                    };
                match checked {
                    Ok(mut checked) => {
                        checked.operation_id = operation_id.map(str::to_owned);
                        document.operations.push(checked);
                    }
                    Err(reason) => document.unusable.push(unusable(reason)),
                }
            }
        }
        Ok(document)
    }

    /// One operation, or why hane cannot call it.
    fn operation(
        &mut self,
        path: &str,
        variables: &[String],
        shared: &Declared,
        method: &str,
        operation: &'a Map<String, Value>,
        at: &str,
    ) -> Checked<Result<ApiOperation, String>> {
        let summary = optional_string(operation, "summary", at)?;
        let description = optional_string(operation, "description", at)?;
        let own = self.parameter_list(operation.get("parameters"), at)?;

        let mut merged = shared.parameters.clone();
        for (parameter, declared_at) in own.parameters {
            let same = merged
                .iter_mut()
                .find(|(other, _)| same_parameter(other, &parameter));
            match same {
                Some(slot) => *slot = (parameter, declared_at),
                None => merged.push((parameter, declared_at)),
            }
        }
        let mut unusable = own.unusable.or_else(|| shared.unusable.clone());

        for (i, (parameter, declared_at)) in merged.iter().enumerate() {
            if let Some((other, _)) = merged[..i].iter().find(|(o, _)| o.name == parameter.name) {
                let message = format!(
                    "parameter `{}` is declared both in {} and in {}; a tool input has one field per name",
                    parameter.name, other.location, parameter.location
                );
                return Err(fault(declared_at, message));
            }
        }
        for (parameter, declared_at) in &merged {
            if parameter.location == ApiParameterLocation::Path
                && !variables.contains(&parameter.name)
            {
                let message = format!(
                    "path parameter `{}` is not a variable of the path template `{path}`",
                    parameter.name
                );
                return Err(fault(declared_at, message));
            }
        }
        for variable in variables {
            let declared = merged
                .iter()
                .any(|(p, _)| p.location == ApiParameterLocation::Path && &p.name == variable);
            if !declared {
                let message =
                    format!("the path template variable `{{{variable}}}` has no path parameter");
                return Err(fault(at, message));
            }
        }

        let body = match operation.get("requestBody") {
            None => None,
            Some(body) => match self.body(body, &child(at, "requestBody"))? {
                Ok(body) => Some(body),
                Err(reason) => {
                    unusable.get_or_insert(reason);
                    None
                }
            },
        };
        if operation.contains_key("requestBody")
            && let Some((_, declared_at)) = merged.iter().find(|(p, _)| p.name == "body")
        {
            let message = "parameter `body` clashes with the request body, which the tool input holds in its field `body`";
            return Err(fault(declared_at, message));
        }
        let (success_status, output_schema) = self.responses(operation, at)?;
        if let Some(reason) = unusable {
            return Ok(Err(reason));
        }

        let parameters: Vec<ApiParameter> = merged.into_iter().map(|(p, _)| p).collect();
        let mut properties = Map::new();
        let mut required = Vec::new();
        for parameter in &parameters {
            let mut schema = parameter.schema.clone();
            if let Some(description) = &parameter.description {
                describe(&mut schema, description);
            }
            properties.insert(parameter.name.clone(), schema);
            if parameter.required {
                required.push(Value::String(parameter.name.clone()));
            }
        }
        if let Some(body) = &body {
            let mut schema = body.schema.clone();
            if let Some(description) = &body.description {
                describe(&mut schema, description);
            }
            properties.insert("body".to_owned(), schema);
            if body.required {
                required.push("body".into());
            }
        }
        let input_schema = json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        });
        Ok(Ok(ApiOperation {
            operation_id: None,
            method: method.to_owned(),
            path: path.to_owned(),
            summary,
            description,
            parameters,
            body,
            input_schema,
            output_schema,
            success_status,
        }))
    }

    /// A `parameters` list of a path item or an operation at `at`.
    fn parameter_list(&mut self, list: Option<&'a Value>, at: &str) -> Checked<Declared> {
        let mut declared = Declared::default();
        let Some(list) = list else {
            return Ok(declared);
        };
        let at = child(at, "parameters");
        let Value::Array(list) = list else {
            let message = format!("`parameters` must be an array, found {}", kind(list));
            return Err(fault(at, message));
        };
        for (i, parameter) in list.iter().enumerate() {
            let parameter_at = child(&at, &i.to_string());
            match self.parameter(parameter, &parameter_at)? {
                Declaration::Kept(parameter, reason) => {
                    if declared
                        .parameters
                        .iter()
                        .any(|(p, _)| same_parameter(p, &parameter))
                    {
                        let message = format!(
                            "{} parameter `{}` is declared twice",
                            parameter.location, parameter.name
                        );
                        return Err(fault(parameter_at, message));
                    }
                    if let Some(reason) = reason {
                        declared.unusable.get_or_insert(reason);
                    }
                    declared.parameters.push((parameter, parameter_at));
                }
                Declaration::Ignored => {}
                Declaration::Unusable(reason) => {
                    declared.unusable.get_or_insert(reason);
                }
            }
        }
        Ok(declared)
    }

    /// One parameter object (or a reference to one) at `at`.
    fn parameter(&mut self, value: &'a Value, at: &str) -> Checked<Declaration> {
        let (value, target, described) = self.deref(value, at)?;
        let map = object(value, &target, "a parameter")?;
        let name = match map.get("name") {
            Some(Value::String(name)) if !name.is_empty() => name.clone(),
            _ => {
                return Err(fault(
                    &target,
                    "a parameter needs a `name`, a non-empty string",
                ));
            }
        };
        let required = optional_bool(map, "required", &target)?.unwrap_or(false);
        let location = match map.get("in").and_then(Value::as_str) {
            Some("path") => ApiParameterLocation::Path,
            Some("query") => ApiParameterLocation::Query,
            Some("header") => ApiParameterLocation::Header,
            Some("cookie") if required => {
                let reason =
                    format!("cookie parameter `{name}` is required; hane sends no cookies");
                return Ok(Declaration::Unusable(reason));
            }
            Some("cookie") => return Ok(Declaration::Ignored),
            _ => {
                let message = "a parameter needs `in`: path, query, header or cookie";
                return Err(fault(child(&target, "in"), message));
            }
        };
        if location == ApiParameterLocation::Header {
            // OpenAPI: these are described elsewhere and the parameter "SHALL be ignored".
            let lower = name.to_ascii_lowercase();
            if matches!(lower.as_str(), "accept" | "content-type" | "authorization") {
                return Ok(Declaration::Ignored);
            }
            if !is_header_name(&name) {
                let message = format!("`{name}` is not an HTTP header name");
                return Err(fault(child(&target, "name"), message));
            }
        }
        let description = match described {
            Some(description) => Some(description),
            None => optional_string(map, "description", &target)?,
        };
        let sent_style = match location {
            ApiParameterLocation::Query => "form",
            ApiParameterLocation::Path | ApiParameterLocation::Header => "simple",
        };
        let style = optional_string(map, "style", &target)?;
        let style = style.as_deref().unwrap_or(sent_style);
        let explode = optional_bool(map, "explode", &target)?.unwrap_or(style == "form");
        let mut unusable = None;
        if style != sent_style {
            unusable = Some(format!(
                "{location} parameter `{name}` has style `{style}`; hane sends query parameters in form style and path and header ones in simple style"
            ));
        }
        let schema = match map.get("schema") {
            Some(schema) => self.schema(schema, &child(&target, "schema"))?,
            None => {
                if map.contains_key("content") {
                    unusable.get_or_insert(format!(
                        "{location} parameter `{name}` is described by `content`, which hane does not send"
                    ));
                }
                json!({})
            }
        };
        let parameter = ApiParameter {
            name,
            location,
            required: required || location == ApiParameterLocation::Path,
            schema,
            description,
            explode,
        };
        Ok(Declaration::Kept(parameter, unusable))
    }

    /// A request body object (or a reference to one) at `at`: a JSON one,
    /// or why there is none.
    fn body(&mut self, value: &'a Value, at: &str) -> Checked<Result<ApiBody, String>> {
        let (value, target, described) = self.deref(value, at)?;
        let map = object(value, &target, "a request body")?;
        let content_at = child(&target, "content");
        let content = match map.get("content") {
            Some(content) => object(content, &content_at, "`content`")?,
            None => return Err(fault(target, "a request body needs `content`")),
        };
        let Some((media_type, media)) = json_media(content) else {
            let offered: Vec<String> = content.keys().map(|k| format!("`{k}`")).collect();
            let reason = if offered.is_empty() {
                "the request body declares no media type; hane sends application/json bodies only"
                    .to_owned()
            } else {
                format!(
                    "the request body offers only {}; hane sends application/json bodies only",
                    offered.join(", ")
                )
            };
            return Ok(Err(reason));
        };
        let media_at = child(&content_at, media_type);
        let media_map = object(media, &media_at, "a media type")?;
        let schema = match media_map.get("schema") {
            Some(schema) => self.schema(schema, &child(&media_at, "schema"))?,
            None => json!({}),
        };
        let description = match described {
            Some(description) => Some(description),
            None => optional_string(map, "description", &target)?,
        };
        Ok(Ok(ApiBody {
            required: optional_bool(map, "required", &target)?.unwrap_or(false),
            media_type: media_type.clone(),
            schema,
            description,
        }))
    }

    /// The lowest declared 2xx status, and the schema of the lowest 2xx
    /// response (explicit codes before `2XX`) with JSON content.
    fn responses(
        &mut self,
        operation: &'a Map<String, Value>,
        at: &str,
    ) -> Checked<(Option<u16>, Option<Value>)> {
        let Some(responses) = operation.get("responses") else {
            return Ok((None, None));
        };
        let at = child(at, "responses");
        let responses = object(responses, &at, "`responses`")?;
        let mut successes: Vec<(u16, &String, &'a Value)> = responses
            .iter()
            .filter_map(|(code, response)| {
                let rank = match code.parse::<u16>() {
                    Ok(status @ 200..=299) => status,
                    _ if code.eq_ignore_ascii_case("2XX") => 300,
                    _ => return None,
                };
                Some((rank, code, response))
            })
            .collect();
        successes.sort_by_key(|(rank, _, _)| *rank);
        let success_status = successes
            .first()
            .map(|(rank, _, _)| *rank)
            .filter(|rank| *rank < 300);
        for (_, code, response) in successes {
            let (response, target, _) = self.deref(response, &child(&at, code))?;
            let response = object(response, &target, "a response")?;
            let content_at = child(&target, "content");
            let content = match response.get("content") {
                None => continue,
                Some(content) => object(content, &content_at, "`content`")?,
            };
            let Some((media_type, media)) = json_media(content) else {
                continue;
            };
            let media_at = child(&content_at, media_type);
            let media = object(media, &media_at, "a media type")?;
            let output = match media.get("schema") {
                Some(schema) => Some(self.schema(schema, &child(&media_at, "schema"))?),
                None => None,
            };
            return Ok((success_status, output));
        }
        Ok((success_status, None))
    }

    /// Follows `$ref`s from a non-schema object (a path item, parameter,
    /// request body or response) to what it names: the object, the pointer
    /// to it, and (3.1) the description the outermost reference gives.
    fn deref(&self, value: &'a Value, at: &str) -> Checked<(&'a Value, String, Option<String>)> {
        let mut value = value;
        let mut at = at.to_owned();
        let mut chain = Vec::new();
        let mut description = None;
        while let Some(reference) = value.get("$ref") {
            if !self.v30 && description.is_none() {
                description = value
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
            let (target, key) = self.target(reference, &at, &chain)?;
            at = key[1..].to_owned();
            chain.push(key);
            value = target;
        }
        Ok((value, at, description))
    }

    /// What a `$ref` at `at` names, and its key (`#` and the decoded
    /// pointer); refused when external, dangling, or already in `chain`.
    fn target(
        &self,
        reference: &Value,
        at: &str,
        chain: &[String],
    ) -> Checked<(&'a Value, String)> {
        let Value::String(reference) = reference else {
            let message = format!("`$ref` must be a string, found {}", kind(reference));
            return Err(fault(at, message));
        };
        let Some(fragment) = reference.strip_prefix('#') else {
            let message = format!(
                "the external `$ref` `{reference}` is not supported: only references inside the document (`#/...`)"
            );
            return Err(unsupported(at, message));
        };
        let pointer = percent_decode(fragment)
            .filter(|p| p.is_empty() || p.starts_with('/'))
            .ok_or_else(|| {
                fault(
                    at,
                    format!("the `$ref` `{reference}` is not a JSON Pointer (`#/...`)"),
                )
            })?;
        let key = format!("#{pointer}");
        if let Some(start) = chain.iter().position(|k| *k == key) {
            let mut cycle = chain[start..].to_vec();
            cycle.push(key);
            let message = format!("`$ref` cycle: {}", cycle.join(" -> "));
            return Err(unsupported(at, message));
        }
        let target = self.root.pointer(&pointer).ok_or_else(|| {
            fault(
                at,
                format!("the `$ref` target `{reference}` does not exist"),
            )
        })?;
        Ok((target, key))
    }

    /// Counts bytes of resolved schema against both caps.
    fn charge(&mut self, bytes: u64) -> Checked<()> {
        self.schema_bytes += bytes;
        self.total_bytes += bytes;
        if self.schema_bytes > MAX_RESOLVED_SCHEMA_BYTES {
            let message = format!(
                "the schema is over {MAX_RESOLVED_SCHEMA_BYTES} bytes of JSON once its `$ref`s are inlined"
            );
            return Err(fault(&self.schema_at, message));
        }
        if self.total_bytes > MAX_RESOLVED_DOCUMENT_BYTES {
            let message = format!(
                "the document's schemas are over {MAX_RESOLVED_DOCUMENT_BYTES} bytes of JSON once their `$ref`s are inlined"
            );
            return Err(fault(&self.schema_at, message));
        }
        Ok(())
    }

    /// A schema at `at`, resolved into plain JSON Schema.
    fn schema(&mut self, value: &'a Value, at: &str) -> Checked<Value> {
        self.schema_bytes = 0;
        self.schema_at = at.to_owned();
        self.subschema(value, at, &mut Vec::new(), 0)
    }

    fn subschema(
        &mut self,
        value: &'a Value,
        at: &str,
        chain: &mut Vec<String>,
        depth: usize,
    ) -> Checked<Value> {
        if depth > MAX_SCHEMA_DEPTH {
            let message = format!(
                "the schema nests deeper than {MAX_SCHEMA_DEPTH} levels once its `$ref`s are inlined"
            );
            return Err(fault(&self.schema_at, message));
        }
        let map = match value {
            Value::Bool(b) => {
                self.charge(5)?;
                return Ok(Value::Bool(*b));
            }
            Value::Object(map) => map,
            other => {
                let message = format!(
                    "expected a schema (an object or a boolean), found {}",
                    kind(other)
                );
                return Err(fault(at, message));
            }
        };
        let Some(reference) = map.get("$ref") else {
            return self.keywords(map, at, chain, depth).map(Value::Object);
        };
        let (target, key) = self.target(reference, at, chain)?;
        let target_at = key[1..].to_owned();
        chain.push(key);
        let resolved = self.subschema(target, &target_at, chain, depth + 1)?;
        chain.pop();
        if self.v30 {
            // 3.0 ignores a Reference Object's siblings, but a `nullable`
            // beside a `$ref` is too common to read as anything but meant.
            if map.get("nullable") == Some(&Value::Bool(true)) {
                return Ok(json!({ "anyOf": [resolved, { "type": "null" }] }));
            }
            return Ok(resolved);
        }
        if map.len() == 1 {
            return Ok(resolved);
        }
        // 3.1: the keywords beside `$ref` apply as well.
        let siblings = self.keywords(map, at, chain, depth)?;
        match resolved {
            _ if siblings.is_empty() => Ok(resolved),
            Value::Object(mut resolved) if siblings.keys().all(|k| is_annotation(k)) => {
                resolved.extend(siblings);
                Ok(Value::Object(resolved))
            }
            resolved => {
                let mut combined = Map::new();
                combined.insert("allOf".to_owned(), Value::Array(vec![resolved]));
                combined.extend(siblings);
                Ok(Value::Object(combined))
            }
        }
    }

    /// A schema object's keywords but `$ref`, with their subschemas
    /// resolved and OpenAPI's own keywords turned into JSON Schema.
    fn keywords(
        &mut self,
        map: &'a Map<String, Value>,
        at: &str,
        chain: &mut Vec<String>,
        depth: usize,
    ) -> Checked<Map<String, Value>> {
        self.charge(2)?;
        let mut out = Map::new();
        let mut nullable = false;
        for (keyword, value) in map {
            let keyword_at = child(at, keyword);
            let resolved = match keyword.as_str() {
                "$ref" | "discriminator" | "xml" | "externalDocs" | "example" => continue,
                "nullable" if self.v30 => {
                    nullable = value == &Value::Bool(true);
                    continue;
                }
                "examples" if !value.is_array() => continue,
                "properties" | "patternProperties" | "$defs" | "definitions"
                | "dependentSchemas" => {
                    let schemas = object(value, &keyword_at, &format!("`{keyword}`"))?;
                    let mut resolved = Map::new();
                    for (name, schema) in schemas {
                        self.charge(name.len() as u64 + 4)?;
                        let schema_at = child(&keyword_at, name);
                        let schema = self.subschema(schema, &schema_at, chain, depth + 1)?;
                        resolved.insert(name.clone(), schema);
                    }
                    Value::Object(resolved)
                }
                "allOf" | "anyOf" | "oneOf" | "prefixItems" => {
                    let Value::Array(schemas) = value else {
                        let message =
                            format!("`{keyword}` must be an array, found {}", kind(value));
                        return Err(fault(keyword_at, message));
                    };
                    self.schema_array(schemas, &keyword_at, chain, depth)?
                }
                "items" if value.is_array() => {
                    let schemas = value.as_array().map(Vec::as_slice).unwrap_or_default();
                    self.schema_array(schemas, &keyword_at, chain, depth)?
                }
                "items"
                | "additionalProperties"
                | "additionalItems"
                | "not"
                | "contains"
                | "propertyNames"
                | "if"
                | "then"
                | "else"
                | "unevaluatedItems"
                | "unevaluatedProperties"
                | "contentSchema" => self.subschema(value, &keyword_at, chain, depth + 1)?,
                _ => {
                    self.charge(json_size(value))?;
                    value.clone()
                }
            };
            self.charge(keyword.len() as u64 + 4)?;
            out.insert(keyword.clone(), resolved);
        }
        if self.v30 {
            to_31_bounds(&mut out);
            if nullable {
                return Ok(to_31_nullable(out));
            }
        }
        Ok(out)
    }

    fn schema_array(
        &mut self,
        schemas: &'a [Value],
        at: &str,
        chain: &mut Vec<String>,
        depth: usize,
    ) -> Checked<Value> {
        let mut resolved = Vec::with_capacity(schemas.len());
        for (i, schema) in schemas.iter().enumerate() {
            let schema_at = child(at, &i.to_string());
            resolved.push(self.subschema(schema, &schema_at, chain, depth + 1)?);
            self.charge(1)?;
        }
        Ok(Value::Array(resolved))
    }
}

/// Whether two parameters have one name and location (header names in
/// any case).
fn same_parameter(a: &ApiParameter, b: &ApiParameter) -> bool {
    a.location == b.location
        && match a.location {
            ApiParameterLocation::Header => a.name.eq_ignore_ascii_case(&b.name),
            _ => a.name == b.name,
        }
}

/// 3.0's boolean `exclusiveMinimum` and `exclusiveMaximum` as 3.1's numbers.
fn to_31_bounds(schema: &mut Map<String, Value>) {
    for (exclusive, bound) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        match schema.get(exclusive) {
            Some(Value::Bool(true)) => match schema.remove(bound) {
                Some(limit) => {
                    schema.insert(exclusive.to_owned(), limit);
                }
                None => {
                    schema.remove(exclusive);
                }
            },
            Some(Value::Bool(false)) => {
                schema.remove(exclusive);
            }
            _ => {}
        }
    }
}

/// 3.0's `nullable: true` as 3.1 says it: `null` added to `type` (and to
/// `enum`), or, for a schema without `type`, `anyOf` it or null.
fn to_31_nullable(mut schema: Map<String, Value>) -> Map<String, Value> {
    let null = Value::String("null".to_owned());
    if let Some(Value::Array(values)) = schema.get_mut("enum")
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
    }
    let only_annotations = schema.keys().all(|k| is_annotation(k));
    match schema.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            schema.insert("type".to_owned(), json!([t, "null"]));
            schema
        }
        Some(Value::Array(types)) => {
            if !types.contains(&null) {
                types.push(null);
            }
            schema
        }
        _ if only_annotations => schema,
        _ => {
            let mut wrapped = Map::new();
            wrapped.insert(
                "anyOf".to_owned(),
                json!([Value::Object(schema), { "type": "null" }]),
            );
            wrapped
        }
    }
}
