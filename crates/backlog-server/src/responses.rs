//! The error answers every operation can give, written into the OpenAPI document once here
//! rather than on each route: a client generated from the document then knows them all, and the
//! API's tests check that every answer is documented.

use utoipa::openapi::header::Header;
use utoipa::openapi::path::Operation;
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr, ResponseBuilder};

/// Adds, to each operation that lacks them, the errors it can answer.
pub(crate) struct CommonResponses;

impl utoipa::Modify for CommonResponses {
    fn modify(&self, openapi: &mut OpenApi) {
        for (path, item) in openapi.paths.paths.iter_mut() {
            for (method, op) in [
                ("get", &mut item.get),
                ("put", &mut item.put),
                ("post", &mut item.post),
                ("delete", &mut item.delete),
                ("patch", &mut item.patch),
            ] {
                if let Some(op) = op {
                    add_errors(path, method, op);
                }
            }
        }
    }
}

fn add_errors(path: &str, method: &str, op: &mut Operation) {
    let secured = op
        .security
        .as_ref()
        .is_some_and(|s| s.iter().any(|r| *r != Default::default()));
    let body = op.request_body.is_some();
    let params = path.contains('{') || op.parameters.as_ref().is_some_and(|p| !p.is_empty());
    let database = !matches!(path, "/healthz" | "/openapi.json");
    let mut add = |status: &str, description: &str| {
        let responses = &mut op.responses.responses;
        if !responses.contains_key(status) {
            let mut response = ResponseBuilder::new().description(description).content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(RefOr::Ref(Ref::from_schema_name("ErrorBody"))))
                    .build(),
            );
            if status == "401" {
                response = response.header(
                    "WWW-Authenticate",
                    Header::new(
                        utoipa::openapi::ObjectBuilder::new()
                            .schema_type(utoipa::openapi::schema::Type::String),
                    ),
                );
            }
            responses.insert(status.to_owned(), RefOr::T(response.build()));
        }
    };
    if body || params {
        add(
            "400",
            "The request is malformed: its path, query or body (the error's code says which)",
        );
    }
    if secured {
        add(
            "401",
            "No token, an unknown one, or not `Authorization: Bearer TOKEN` (`unauthorized`)",
        );
    }
    if secured || method != "get" {
        add(
            "403",
            "The token's scope does not allow this (`forbidden`), or a page of another site \
             asked the browser to send it (`cross_site_refused`)",
        );
    }
    if path.contains("{id}") {
        add("404", "No such job (`job_not_found`)");
    }
    if body {
        add(
            "413",
            "The body is larger than the server takes (`body_too_large`), or a payload is (`payload_too_large`)",
        );
        add(
            "415",
            "The body is not `application/json` (`content_type_invalid`)",
        );
    }
    add(
        "421",
        "The request names a host this server does not answer for (`host_not_allowed`)",
    );
    if database {
        add(
            "500",
            "The database reported an error (`database_error`; the details are in the server's log)",
        );
        add(
            "503",
            "The database cannot be reached, is busy, or cannot write (`database_unavailable`), \
             or its schema is outdated (`schema_outdated`)",
        );
    }
}
