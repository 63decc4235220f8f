use super::*;

const GARAGE: &str = include_str!("../../tests/openapi/garage.json");
const WORKSHOP: &str = include_str!("../../tests/openapi/workshop.yaml");

fn garage() -> ApiDocument {
    ApiDocument::parse("garage.json", GARAGE).unwrap()
}

fn workshop() -> ApiDocument {
    ApiDocument::parse("workshop.yaml", WORKSHOP).unwrap()
}

/// The error a document is refused with.
fn refused(text: &str) -> OpenApiError {
    ApiDocument::parse("api.yaml", text).unwrap_err()
}

/// A 3.1 document with the given `paths` and `components`, as YAML.
fn document(paths: &str, components: &str) -> String {
    format!(
        "openapi: 3.1.0\ninfo: {{title: T, version: '1'}}\npaths:\n{paths}\ncomponents:\n{components}\n"
    )
}

fn status_schema() -> Value {
    json!({"type": "string", "enum": ["booked", "done", "cancelled"], "title": "ServiceStatus"})
}

fn kind_schema() -> Value {
    json!({"type": "string", "enum": ["inspection", "oil_change", "tyres"], "title": "ServiceKind"})
}

fn service_schema() -> Value {
    json!({
        "properties": {
            "id": {"type": "integer", "title": "Id"},
            "kind": kind_schema(),
            "date": {"type": "string", "format": "date", "title": "Date"},
            "notes": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Notes"},
            "status": {
                "type": "string",
                "enum": ["booked", "done", "cancelled"],
                "title": "ServiceStatus",
                "description": "Where the booking stands"
            }
        },
        "type": "object",
        "required": ["id", "kind", "date", "status"],
        "title": "Service"
    })
}

#[test]
fn fastapi_document_reads_as_its_operations() {
    let garage = garage();
    assert_eq!(garage.openapi, "3.1.0");
    assert_eq!(garage.title, "Garage API");
    assert_eq!(garage.version, "0.4.2");
    let names: Vec<String> = garage.operations.iter().map(ApiOperation::name).collect();
    assert_eq!(
        names,
        [
            "invoice_pdf_invoices__invoice_id__pdf_get",
            "forget_vehicle_vehicles__registration__delete",
            "list_services_vehicles__registration__services_get",
            "book_service_vehicles__registration__services_post",
        ]
    );
    assert_eq!(
        garage.unusable,
        [ApiUnusable {
            operation_id: Some("upload_photo_uploads_photos_post".to_owned()),
            method: "POST".to_owned(),
            path: "/uploads/photos".to_owned(),
            reason: "the request body offers only `multipart/form-data`; hane sends application/json bodies only".to_owned(),
        }]
    );
}

#[test]
fn fastapi_get_has_path_and_query_parameters_in_its_input() {
    let garage = garage();
    let list = garage
        .find("list_services_vehicles__registration__services_get")
        .unwrap();
    assert_eq!(list.method, "GET");
    assert_eq!(list.path, "/vehicles/{registration}/services");
    assert_eq!(list.summary.as_deref(), Some("List Services"));
    assert_eq!(
        list.description.as_deref(),
        Some("The services booked for one vehicle, newest first.")
    );
    assert!(list.is_read());
    assert_eq!(list.body, None);
    assert_eq!(
        list.parameters[0],
        ApiParameter {
            name: "registration".to_owned(),
            location: ApiParameterLocation::Path,
            required: true,
            schema: json!({"type": "string", "title": "Registration"}),
            description: Some("The number plate, as printed".to_owned()),
            explode: false,
        }
    );
    assert_eq!(list.parameters[1].location, ApiParameterLocation::Query);
    assert!(list.parameters[1].explode);
    assert_eq!(
        list.input_schema,
        json!({
            "type": "object",
            "properties": {
                "registration": {
                    "type": "string",
                    "title": "Registration",
                    "description": "The number plate, as printed"
                },
                "limit": {"type": "integer", "maximum": 100, "minimum": 1, "default": 20, "title": "Limit"},
                "status": {
                    "anyOf": [{"type": "array", "items": status_schema()}, {"type": "null"}],
                    "title": "Status"
                }
            },
            "required": ["registration"],
            "additionalProperties": false
        })
    );
    assert_eq!(list.success_status, Some(200));
    assert_eq!(
        list.output_schema,
        Some(json!({
            "type": "array",
            "items": service_schema(),
            "title": "Response List Services Vehicles  Registration  Services Get"
        }))
    );
}

#[test]
fn fastapi_post_takes_its_referenced_body_as_the_body_field() {
    let garage = garage();
    let book = garage
        .find("POST /vehicles/{registration}/services")
        .unwrap();
    assert!(!book.is_read());
    let booking = json!({
        "properties": {
            "kind": kind_schema(),
            "date": {"type": "string", "format": "date", "title": "Date"},
            "notes": {"anyOf": [{"type": "string", "maxLength": 500}, {"type": "null"}], "title": "Notes"}
        },
        "type": "object",
        "required": ["kind", "date"],
        "title": "ServiceBooking"
    });
    assert_eq!(
        book.body,
        Some(ApiBody {
            required: true,
            media_type: "application/json".to_owned(),
            schema: booking.clone(),
            description: None,
        })
    );
    assert_eq!(
        book.input_schema,
        json!({
            "type": "object",
            "properties": {
                "registration": {"type": "string", "title": "Registration"},
                "x-request-id": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "X-Request-Id"},
                "body": booking
            },
            "required": ["registration", "body"],
            "additionalProperties": false
        })
    );
    assert_eq!(book.success_status, Some(201));
    assert_eq!(book.output_schema, Some(service_schema()));
}

#[test]
fn responses_without_json_content_give_no_output_schema() {
    let garage = garage();
    let forget = garage
        .find("forget_vehicle_vehicles__registration__delete")
        .unwrap();
    assert_eq!(forget.success_status, Some(204));
    assert_eq!(forget.output_schema, None);
    let pdf = garage
        .find("invoice_pdf_invoices__invoice_id__pdf_get")
        .unwrap();
    assert_eq!(pdf.success_status, Some(200));
    assert_eq!(pdf.output_schema, None);
}

#[test]
fn openapi_30_yaml_becomes_json_schema() {
    let workshop = workshop();
    assert_eq!(workshop.openapi, "3.0.3");
    assert_eq!(workshop.version, "2.1");
    let job = json!({
        "type": "object",
        "required": ["id", "state"],
        "properties": {
            "id": {"type": "integer"},
            "state": {"type": ["string", "null"], "enum": ["open", "closed", null]},
            "mechanic": {
                "anyOf": [
                    {"allOf": [{"type": "object", "properties": {"name": {"type": "string"}}}]},
                    {"type": "null"}
                ]
            },
            "supervisor": {
                "anyOf": [
                    {"type": "object", "properties": {"name": {"type": "string"}}},
                    {"type": "null"}
                ]
            },
            "nullable": {"type": "string", "description": "A property that happens to be named nullable"}
        }
    });
    let get = workshop.find("getJob").unwrap();
    assert_eq!(
        get.input_schema,
        json!({
            "type": "object",
            "properties": {
                "job": {"type": "integer", "exclusiveMinimum": 0, "description": "The job number"},
                "verbose": {"type": "boolean", "default": false, "description": "Include the job's notes"},
                "fields": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["job"],
            "additionalProperties": false
        })
    );
    let names: Vec<&str> = get.parameters.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["job", "verbose", "fields"]);
    assert_eq!(get.success_status, Some(200));
    assert_eq!(get.output_schema, Some(job.clone()));

    let update = workshop.find("updateJob").unwrap();
    assert_eq!(update.method, "PATCH");
    let names: Vec<&str> = update.parameters.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["job", "verbose"]);
    let change = json!({
        "type": "object",
        "properties": {
            "state": {"type": "string", "enum": ["open", "closed"]},
            "notes": {"type": ["string", "null"], "maxLength": 2000}
        }
    });
    assert_eq!(
        update.body,
        Some(ApiBody {
            required: true,
            media_type: "application/merge-patch+json".to_owned(),
            schema: change,
            description: None,
        })
    );
    assert_eq!(update.output_schema, Some(job.clone()));

    let list = workshop.find("listJobs").unwrap();
    assert_eq!(list.parameters, []);
    assert_eq!(list.success_status, None);
    assert_eq!(
        list.output_schema,
        Some(json!({"type": "array", "items": job}))
    );

    assert_eq!(
        workshop
            .find_unusable("GET /reports")
            .map(|u| u.reason.as_str()),
        Some("cookie parameter `token` is required; hane sends no cookies")
    );
    assert_eq!(workshop.find("report"), None);
}

#[test]
fn ref_siblings_in_31_apply_and_in_30_are_ignored() {
    let paths = "  /a:\n    get:\n      responses:\n        '200':\n          description: A\n          content:\n            application/json:\n              schema: {$ref: '#/components/schemas/A', description: Why, minProperties: 1}\n";
    let components = "  schemas:\n    A: {type: object, description: What}\n";
    let text = document(paths, components);
    let a = ApiDocument::parse("api.yaml", &text).unwrap();
    assert_eq!(
        a.operations[0].output_schema,
        Some(json!({
            "allOf": [{"type": "object", "description": "What"}],
            "description": "Why",
            "minProperties": 1
        }))
    );
    let annotated = text.replace(", minProperties: 1", "");
    let a = ApiDocument::parse("api.yaml", &annotated).unwrap();
    assert_eq!(
        a.operations[0].output_schema,
        Some(json!({"type": "object", "description": "Why"}))
    );
    let old = text.replace("openapi: 3.1.0", "openapi: 3.0.0");
    let a = ApiDocument::parse("api.yaml", &old).unwrap();
    assert_eq!(
        a.operations[0].output_schema,
        Some(json!({"type": "object", "description": "What"}))
    );
}

#[test]
fn find_takes_an_operation_id_or_method_and_path() {
    let garage = garage();
    let by_id = garage
        .find("forget_vehicle_vehicles__registration__delete")
        .unwrap();
    let by_route = garage.find("delete /vehicles/{registration}").unwrap();
    assert_eq!(by_id, by_route);
    assert_eq!(by_route.path, "/vehicles/{registration}");
    assert_eq!(garage.find("DELETE /vehicles/{registration}/"), None);
    assert_eq!(garage.find("DELETE /vehicles/{id}"), None);
    assert_eq!(garage.find("forget_vehicle"), None);
    assert_eq!(
        garage
            .find_unusable("POST /uploads/photos")
            .map(ApiUnusable::name),
        Some("upload_photo_uploads_photos_post".to_owned())
    );
    let text = document(
        "  /things/{id}:\n    put:\n      parameters: [{name: id, in: path, required: true}]\n      responses: {'200': {description: Done}}\n",
        "  {}",
    );
    let untitled = ApiDocument::parse("api.yaml", &text).unwrap();
    assert_eq!(untitled.operations[0].name(), "PUT /things/{id}");
    assert_eq!(
        untitled.find("Put /things/{id}").map(ApiOperation::name),
        Some("PUT /things/{id}".to_owned())
    );
}

#[test]
fn request_percent_encodes_path_values() {
    let garage = garage();
    let list = garage
        .find("list_services_vehicles__registration__services_get")
        .unwrap();
    let request = list
        .request(&json!({"registration": "品川 300 あ 12-34"}))
        .unwrap();
    assert_eq!(
        request,
        ApiRequest {
            method: "GET".to_owned(),
            path_and_query: "/vehicles/%E5%93%81%E5%B7%9D%20300%20%E3%81%82%2012-34/services"
                .to_owned(),
            headers: vec![],
            body: None,
        }
    );
    let request = list
        .request(&json!({"registration": "AB/12?x#y~z._"}))
        .unwrap();
    assert_eq!(
        request.path_and_query,
        "/vehicles/AB%2F12%3Fx%23y~z._/services"
    );
    let pdf = garage
        .find("invoice_pdf_invoices__invoice_id__pdf_get")
        .unwrap();
    let request = pdf.request(&json!({"invoice_id": 42})).unwrap();
    assert_eq!(request.path_and_query, "/invoices/42/pdf");
}

#[test]
fn request_repeats_array_query_keys_in_document_order() {
    let garage = garage();
    let list = garage
        .find("list_services_vehicles__registration__services_get")
        .unwrap();
    let request = list
        .request(&json!({
            "status": ["booked", "done"],
            "registration": "AB12",
            "limit": 5
        }))
        .unwrap();
    assert_eq!(
        request.path_and_query,
        "/vehicles/AB12/services?limit=5&status=booked&status=done"
    );
    let request = list
        .request(&json!({"registration": "AB12", "limit": null, "status": null}))
        .unwrap();
    assert_eq!(request.path_and_query, "/vehicles/AB12/services");
    let request = list
        .request(&json!({"registration": "AB12", "limit": 5.0}))
        .unwrap();
    assert_eq!(request.path_and_query, "/vehicles/AB12/services?limit=5");
}

#[test]
fn request_joins_unexploded_query_arrays_with_commas() {
    let workshop = workshop();
    let get = workshop.find("getJob").unwrap();
    let request = get
        .request(&json!({"job": 7, "fields": ["id", "state & notes"], "verbose": true}))
        .unwrap();
    assert_eq!(
        request.path_and_query,
        "/jobs/7?verbose=true&fields=id,state%20%26%20notes"
    );
}

#[test]
fn request_sends_headers_and_the_json_body() {
    let garage = garage();
    let book = garage
        .find("book_service_vehicles__registration__services_post")
        .unwrap();
    let body = json!({"kind": "tyres", "date": "2025-06-02"});
    let request = book
        .request(&json!({"registration": "AB12", "x-request-id": "r-1", "body": body}))
        .unwrap();
    assert_eq!(
        request,
        ApiRequest {
            method: "POST".to_owned(),
            path_and_query: "/vehicles/AB12/services".to_owned(),
            headers: vec![
                ("x-request-id".to_owned(), "r-1".to_owned()),
                ("content-type".to_owned(), "application/json".to_owned()),
            ],
            body: Some(body),
        }
    );
    assert_eq!(
        book.request(&json!({"registration": "AB12"})),
        Err("missing required field `body`".to_owned())
    );
    assert_eq!(
        book.request(
            &json!({"registration": "AB12", "x-request-id": "a\r\nX-Admin: 1", "body": {}})
        ),
        Err("header parameter `x-request-id` holds a control character".to_owned())
    );
}

#[test]
fn request_refuses_inputs_that_do_not_fit() {
    let garage = garage();
    let list = garage
        .find("list_services_vehicles__registration__services_get")
        .unwrap();
    let refusal = |input: Value| list.request(&input).unwrap_err();
    assert_eq!(
        refusal(json!({"limit": 5})),
        "missing required path parameter `registration`"
    );
    assert_eq!(
        refusal(json!({"registration": null})),
        "missing required path parameter `registration`"
    );
    assert_eq!(
        refusal(json!({"registration": ""})),
        "path parameter `registration` is empty"
    );
    assert_eq!(
        refusal(json!({"registration": "AB12", "limit": "5"})),
        "query parameter `limit` must be integer, found a string"
    );
    assert_eq!(
        refusal(json!({"registration": "AB12", "limit": 2.5})),
        "query parameter `limit` must be integer, found a number"
    );
    assert_eq!(
        refusal(json!({"registration": {"plate": "AB12"}})),
        "path parameter `registration` is an object; only strings, numbers, booleans and arrays of them can be sent"
    );
    assert_eq!(
        refusal(json!({"registration": "AB12", "status": "booked"})),
        "query parameter `status` must be array or null, found a string"
    );
    assert_eq!(
        refusal(json!({"registration": "AB12", "status": [7]})),
        "an item of query parameter `status` must be string, found a number"
    );
    assert_eq!(
        refusal(json!({"registration": "AB12", "status": [["booked"]]})),
        "query parameter `status` holds an array in its array; only strings, numbers and booleans can be items"
    );
    assert_eq!(
        refusal(json!({"registration": "AB12", "body": {}})),
        "unknown input field `body`"
    );
    assert_eq!(
        refusal(json!(["AB12"])),
        "the input must be an object, found an array"
    );
}

#[test]
fn not_json_or_yaml_is_refused() {
    let error = refused("{\"openapi\": \"3.1.0\",");
    assert_eq!(error.pointer, "");
    assert_eq!(error.operation, None);
    assert_eq!(
        error.message,
        "neither JSON nor YAML: EOF while parsing a value at line 1 column 20"
    );
    assert_eq!(
        error.to_string(),
        "api.yaml: neither JSON nor YAML: EOF while parsing a value at line 1 column 20"
    );
    let error = refused("openapi: 3.1.0\n  info: [\n");
    assert!(
        error.message.starts_with("neither JSON nor YAML: "),
        "{}",
        error.message
    );
    let error = refused("just some words");
    assert_eq!(
        error.message,
        "an OpenAPI document must be an object, found a string"
    );
}

#[test]
fn oversize_document_is_refused() {
    let padding = " ".repeat(MAX_OPENAPI_BYTES as usize);
    let error = refused(&format!("{{\"openapi\": \"3.1.0\"}}{padding}"));
    assert_eq!(error.pointer, "");
    assert_eq!(
        error.message,
        "the document is 4194324 bytes, over the limit of 4194304"
    );
}

#[test]
fn other_openapi_versions_are_refused() {
    let error = refused("swagger: '2.0'\ninfo: {title: T, version: '1'}\npaths: {}\n");
    assert_eq!(error.pointer, "/swagger");
    assert_eq!(
        error.to_string(),
        "api.yaml: at /swagger: Swagger 2.0 (OpenAPI 2) is not supported: expected an OpenAPI 3.0.x or 3.1.x document"
    );
    let error = refused("openapi: 3.2.0\ninfo: {title: T, version: '1'}\n");
    assert_eq!(error.pointer, "/openapi");
    assert_eq!(
        error.message,
        "OpenAPI 3.2.0 is not supported: expected 3.0.x or 3.1.x"
    );
    let error = refused("openapi: 3.1\ninfo: {title: T, version: '1'}\n");
    assert_eq!(
        error.message,
        "`openapi` must be a version string such as \"3.1.0\", found a number"
    );
    let error = refused("info: {title: T, version: '1'}\n");
    assert_eq!(
        error.message,
        "missing `openapi`: expected an OpenAPI 3.0.x or 3.1.x document"
    );
}

/// The reason `document` gives for its unusable operation `name`.
fn why_unusable(document: &ApiDocument, name: &str) -> String {
    document
        .find_unusable(name)
        .unwrap_or_else(|| panic!("{name} is not unusable: {document:#?}"))
        .reason
        .clone()
}

#[test]
fn a_recursive_schema_makes_its_operation_unusable_naming_the_chain() {
    let paths = "  /nodes:\n    get:\n      operationId: listNodes\n      responses:\n        '200':\n          description: Nodes\n          content:\n            application/json:\n              schema: {$ref: '#/components/schemas/Node'}\n  /health:\n    get:\n      operationId: health\n      responses: {'200': {description: OK}}\n";
    let components = "  schemas:\n    Node:\n      type: object\n      properties:\n        children:\n          type: array\n          items: {$ref: '#/components/schemas/Node'}\n";
    let read = ApiDocument::parse("api.yaml", &document(paths, components)).unwrap();
    assert_eq!(
        why_unusable(&read, "listNodes"),
        "`$ref` cycle: #/components/schemas/Node -> #/components/schemas/Node (at /components/schemas/Node/properties/children/items)"
    );
    // The document's other operations are not at fault.
    assert!(read.find("health").is_some());
    assert!(read.find("listNodes").is_none());

    let components = "  schemas:\n    Node: {$ref: '#/components/schemas/Tree'}\n    Tree:\n      properties:\n        first: {$ref: '#/components/schemas/Node'}\n";
    let read = ApiDocument::parse("api.yaml", &document(paths, components)).unwrap();
    assert_eq!(
        why_unusable(&read, "GET /nodes"),
        "`$ref` cycle: #/components/schemas/Node -> #/components/schemas/Tree -> #/components/schemas/Node (at /components/schemas/Tree/properties/first)"
    );
}

#[test]
fn missing_ref_target_is_refused() {
    let paths = "  /vehicles/{registration}:\n    get:\n      operationId: getVehicle\n      parameters:\n        - name: registration\n          in: path\n          required: true\n          schema: {$ref: '#/components/schemas/Registration'}\n      responses: {'200': {description: OK}}\n";
    let error = refused(&document(paths, "  schemas: {}"));
    assert_eq!(error.operation.as_deref(), Some("getVehicle"));
    assert_eq!(
        error.pointer,
        "/paths/~1vehicles~1{registration}/get/parameters/0/schema"
    );
    assert_eq!(
        error.message,
        "the `$ref` target `#/components/schemas/Registration` does not exist"
    );
    let error = refused(&document(
        &paths.replace(
            "schema: {$ref: '#/components/schemas/Registration'}",
            "$ref: '#/components/parameters/Plate'",
        ),
        "  schemas: {}",
    ));
    assert_eq!(
        error.pointer,
        "/paths/~1vehicles~1{registration}/get/parameters/0"
    );
    assert_eq!(
        error.message,
        "the `$ref` target `#/components/parameters/Plate` does not exist"
    );
}

#[test]
fn an_external_ref_makes_its_operation_unusable() {
    let paths = "  /vehicles:\n    post:\n      operationId: addVehicle\n      requestBody:\n        content:\n          application/json:\n            schema: {$ref: 'vehicle.yaml#/Vehicle'}\n      responses: {'201': {description: Added}}\n";
    let read = ApiDocument::parse("api.yaml", &document(paths, "  {}")).unwrap();
    assert_eq!(
        why_unusable(&read, "addVehicle"),
        "the external `$ref` `vehicle.yaml#/Vehicle` is not supported: only references inside the document (`#/...`) (at /paths/~1vehicles/post/requestBody/content/application~1json/schema)"
    );
    assert!(read.operations.is_empty());
}

#[test]
fn duplicate_operation_id_is_refused() {
    let paths = "  /a:\n    get:\n      operationId: fetch\n      responses: {'200': {description: A}}\n  /b:\n    get:\n      operationId: fetch\n      responses: {'200': {description: B}}\n";
    let error = refused(&document(paths, "  {}"));
    assert_eq!(error.operation.as_deref(), Some("fetch"));
    assert_eq!(error.pointer, "/paths/~1b/get/operationId");
    assert_eq!(
        error.message,
        "operationId `fetch` is already used at /paths/~1a/get"
    );
}

#[test]
fn parameter_named_body_beside_a_body_is_refused() {
    let paths = "  /notes:\n    post:\n      operationId: addNote\n      parameters:\n        - {name: body, in: query, schema: {type: string}}\n      requestBody:\n        content:\n          application/json:\n            schema: {type: object}\n      responses: {'201': {description: Added}}\n";
    let error = refused(&document(paths, "  {}"));
    assert_eq!(error.pointer, "/paths/~1notes/post/parameters/0");
    assert_eq!(
        error.message,
        "parameter `body` clashes with the request body, which the tool input holds in its field `body`"
    );
    let without_body = paths.replace(
        "      requestBody:\n        content:\n          application/json:\n            schema: {type: object}\n",
        "",
    );
    let notes = ApiDocument::parse("api.yaml", &document(&without_body, "  {}")).unwrap();
    let request = notes.operations[0].request(&json!({"body": "x"})).unwrap();
    assert_eq!(request.path_and_query, "/notes?body=x");
    assert_eq!(request.body, None);
}

#[test]
fn one_name_in_two_locations_is_refused() {
    let paths = "  /items/{id}:\n    parameters:\n      - {name: id, in: path, required: true, schema: {type: string}}\n    get:\n      operationId: getItem\n      parameters:\n        - {name: id, in: header, schema: {type: string}}\n      responses: {'200': {description: OK}}\n";
    let error = refused(&document(paths, "  {}"));
    assert_eq!(error.pointer, "/paths/~1items~1{id}/get/parameters/0");
    assert_eq!(
        error.message,
        "parameter `id` is declared both in path and in header; a tool input has one field per name"
    );
    let twice = paths.replace("in: header", "in: path, required: true");
    let item = ApiDocument::parse("api.yaml", &document(&twice, "  {}")).unwrap();
    assert_eq!(item.operations[0].parameters.len(), 1);
    let same_list = "  /items:\n    get:\n      parameters:\n        - {name: q, in: query}\n        - {name: q, in: query}\n      responses: {'200': {description: OK}}\n";
    let error = refused(&document(same_list, "  {}"));
    assert_eq!(error.operation.as_deref(), Some("GET /items"));
    assert_eq!(error.pointer, "/paths/~1items/get/parameters/1");
    assert_eq!(error.message, "query parameter `q` is declared twice");
}

#[test]
fn path_template_and_path_parameters_must_agree() {
    let paths = "  /items/{id}:\n    get:\n      responses: {'200': {description: OK}}\n";
    let error = refused(&document(paths, "  {}"));
    assert_eq!(error.pointer, "/paths/~1items~1{id}/get");
    assert_eq!(
        error.message,
        "the path template variable `{id}` has no path parameter"
    );
    let paths = "  /items:\n    get:\n      parameters: [{name: id, in: path, required: true}]\n      responses: {'200': {description: OK}}\n";
    let error = refused(&document(paths, "  {}"));
    assert_eq!(error.pointer, "/paths/~1items/get/parameters/0");
    assert_eq!(
        error.message,
        "path parameter `id` is not a variable of the path template `/items`"
    );
    let error = refused(&document("  /items/{id:\n    get: {}\n", "  {}"));
    assert_eq!(error.pointer, "/paths/~1items~1{id");
    assert_eq!(
        error.message,
        "the path template `/items/{id` has a `{` without a `}`"
    );
}

#[test]
fn nested_refs_that_would_blow_up_are_refused() {
    // Each level holds the next twice: 2^40 copies once inlined.
    let mut components = String::from("  schemas:\n");
    for level in 0..40 {
        let next = level + 1;
        components.push_str(&format!(
            "    L{level}:\n      properties:\n        a: {{$ref: '#/components/schemas/L{next}'}}\n        b: {{$ref: '#/components/schemas/L{next}'}}\n"
        ));
    }
    components.push_str("    L40: {type: string}\n");
    let paths = "  /bomb:\n    get:\n      responses:\n        '200':\n          description: Big\n          content:\n            application/json:\n              schema: {$ref: '#/components/schemas/L0'}\n";
    let error = refused(&document(paths, &components));
    assert_eq!(error.operation.as_deref(), Some("GET /bomb"));
    assert_eq!(
        error.pointer,
        "/paths/~1bomb/get/responses/200/content/application~1json/schema"
    );
    assert_eq!(
        error.message,
        "the schema is over 262144 bytes of JSON once its `$ref`s are inlined"
    );
}

#[test]
fn schemas_nested_too_deep_are_refused() {
    let mut components = String::from("  schemas:\n");
    for level in 0..200 {
        let next = level + 1;
        components.push_str(&format!(
            "    L{level}: {{items: {{$ref: '#/components/schemas/L{next}'}}}}\n"
        ));
    }
    components.push_str("    L200: {type: string}\n");
    let paths = "  /deep:\n    get:\n      responses:\n        '200':\n          description: Deep\n          content:\n            application/json:\n              schema: {$ref: '#/components/schemas/L0'}\n";
    let error = refused(&document(paths, &components));
    assert_eq!(
        error.message,
        "the schema nests deeper than 128 levels once its `$ref`s are inlined"
    );
}

#[test]
fn malformed_operations_are_refused_but_unsupported_ones_listed() {
    let paths = "  /a:\n    get:\n      parameters:\n        - {name: a, in: query, schema: {type: string, properties: 3}}\n      responses: {}\n";
    let error = refused(&document(paths, "  {}"));
    assert_eq!(
        error.pointer,
        "/paths/~1a/get/parameters/0/schema/properties"
    );
    assert_eq!(
        error.message,
        "`properties` must be an object, found a number"
    );

    let paths = "  /a:\n    get:\n      parameters:\n        - {name: f, in: query, style: deepObject, schema: {type: object}}\n      responses: {}\n    post:\n      requestBody:\n        content: {text/plain: {}, application/xml: {}}\n      responses: {}\n    trace:\n      responses: {}\n";
    let a = ApiDocument::parse("api.yaml", &document(paths, "  {}")).unwrap();
    assert_eq!(a.operations, []);
    let reasons: Vec<(String, &str)> = a
        .unusable
        .iter()
        .map(|u| (u.name(), u.reason.as_str()))
        .collect();
    assert_eq!(
        reasons,
        [
            (
                "GET /a".to_owned(),
                "query parameter `f` has style `deepObject`; hane sends query parameters in form style and path and header ones in simple style"
            ),
            (
                "POST /a".to_owned(),
                "the request body offers only `application/xml`, `text/plain`; hane sends application/json bodies only"
            ),
            (
                "TRACE /a".to_owned(),
                "TRACE operations are not offered as tools"
            ),
        ]
    );
}

#[test]
fn error_display_leaves_out_what_is_unknown() {
    let error = OpenApiError {
        file: "api.json".to_owned(),
        operation: Some("getVehicle".to_owned()),
        pointer: "/paths/~1vehicles/get".to_owned(),
        message: "broken".to_owned(),
    };
    assert_eq!(
        error.to_string(),
        "api.json: operation `getVehicle` at /paths/~1vehicles/get: broken"
    );
    let error = OpenApiError {
        pointer: String::new(),
        ..error
    };
    assert_eq!(
        error.to_string(),
        "api.json: operation `getVehicle`: broken"
    );
}
