//! In-process API tests: the router over a fresh database, requests through `tower::oneshot`,
//! and every request and response checked against the OpenAPI document.
#![allow(dead_code)]

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use backlog::Client;
use backlog_server::{ServerConfig, Tokens};
use backlog_testdb::{Engine, TestDb};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

pub const ADMIN: &str = "admin-secret-0123456789";
pub const PRODUCE: &str = "produce-secret-0123456789";
pub const READ: &str = "read-secret-0123456789";

/// A router over a fresh database, and its OpenAPI document.
pub struct Api {
    pub db: TestDb,
    pub app: Router,
    pub spec: Value,
    /// The token sent when a call names none (None: no Authorization header).
    pub token: Option<&'static str>,
}

/// The tokens of the tests that check scopes.
pub fn tokens() -> Tokens {
    Tokens::parse(&format!(
        "ops admin {ADMIN}\nci produce {PRODUCE}\nviewer read {READ}"
    ))
    .unwrap()
}

impl Api {
    /// No tokens (every request is admin), over `client` (the database's own by default).
    pub async fn new(engine: Engine) -> Api {
        let db = TestDb::new(engine).await;
        let client = db.client.clone();
        Api::with(
            db,
            client,
            ServerConfig::new("127.0.0.1:0".parse().unwrap()),
        )
    }

    pub fn with(db: TestDb, client: Arc<Client>, config: ServerConfig) -> Api {
        let app = backlog_server::router(client, &config);
        let spec = serde_json::to_value(backlog_server::openapi()).unwrap();
        let token = (!config.tokens.is_empty()).then_some(ADMIN);
        Api {
            db,
            app,
            spec,
            token,
        }
    }

    /// A request with the default token; the response status and JSON body (Null if none).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        self.call_as(self.token, method, path, body).await
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.call(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::POST, path, Some(body)).await
    }

    /// Expects 2xx and returns the body.
    pub async fn ok(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        let (status, v) = self.call(method.clone(), path, body).await;
        assert!(status.is_success(), "{method} {path}: {status} {v}");
        v
    }

    /// Expects an error with this status and code.
    pub async fn fails(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        status: StatusCode,
        code: &str,
    ) -> Value {
        let (got, v) = self.call(method.clone(), path, body).await;
        assert_eq!(got, status, "{method} {path}: {v}");
        assert_eq!(v["error"]["code"], code, "{method} {path}: {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "a message: {v}"
        );
        v
    }

    pub async fn call_as(
        &self,
        token: Option<&str>,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let text = body.as_ref().map(|b| b.to_string());
        self.raw(token, method, path, text, "application/json")
            .await
    }

    /// Any body and content type; checks the response against the document.
    pub async fn raw(
        &self,
        token: Option<&str>,
        method: Method,
        path: &str,
        body: Option<String>,
        content_type: &str,
    ) -> (StatusCode, Value) {
        self.raw_with(token, method, path, body, content_type, &[])
            .await
    }

    /// A POST of JSON with more request headers.
    pub async fn post_with(
        &self,
        path: &str,
        body: Value,
        headers: &[(&str, &str)],
    ) -> (StatusCode, Value) {
        let body = Some(body.to_string());
        self.raw_with(
            self.token,
            Method::POST,
            path,
            body,
            "application/json",
            headers,
        )
        .await
    }

    /// [`Api::raw`] with more request headers.
    pub async fn raw_with(
        &self,
        token: Option<&str>,
        method: Method,
        path: &str,
        body: Option<String>,
        content_type: &str,
        headers: &[(&str, &str)],
    ) -> (StatusCode, Value) {
        let mut req = Request::builder().method(method.clone()).uri(path);
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let req = match &body {
            Some(b) => req
                .header("content-type", content_type)
                .body(Body::from(b.clone())),
            None => req.body(Body::empty()),
        }
        .unwrap();
        let res = self.app.clone().oneshot(req).await.unwrap();
        let status = res.status();
        let content_type_of = res
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let www_authenticate = res.headers().contains_key("www-authenticate");
        let bytes = res.into_body().collect().await.unwrap().to_bytes();
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()))
        };
        let operation = self.operation(&method, path);
        if status.is_success()
            && let Some(b) = &body
            && let Ok(sent) = serde_json::from_str::<Value>(b).map(whole_floats)
            && let Some(schema) =
                operation["requestBody"]["content"]["application/json"].get("schema")
        {
            self.validate(schema, &sent, &format!("request of {method} {path}"));
        }
        let documented = &operation["responses"][status.as_str()];
        assert!(
            !documented.is_null(),
            "{method} {path} answered {status}, which its operation does not document: {value}"
        );
        // The content type is the one the document gives (JSON for every error).
        let content = documented["content"].as_object();
        if let Some(content) = content.filter(|c| !c.is_empty()) {
            assert!(
                content.contains_key(&content_type_of),
                "{method} {path} answered {status} as {content_type_of:?}; the document says {:?}",
                content.keys().collect::<Vec<_>>()
            );
        }
        if status == StatusCode::UNAUTHORIZED {
            assert!(www_authenticate, "a 401 without WWW-Authenticate");
        }
        if status.is_client_error() || status.is_server_error() {
            let schema = json!({"$ref": "#/components/schemas/ErrorBody"});
            self.validate(&schema, &value, &format!("error of {method} {path}"));
        } else if let Some(schema) = documented["content"]["application/json"].get("schema") {
            self.validate(schema, &value, &format!("response of {method} {path}"));
        }
        (status, value)
    }

    /// The operation of the document that serves this method and concrete path.
    fn operation(&self, method: &Method, path: &str) -> Value {
        let path = path.split('?').next().unwrap();
        let segments: Vec<&str> = path.split('/').collect();
        let paths = self.spec["paths"].as_object().unwrap();
        let (_, item) = paths
            .iter()
            .find(|(template, _)| {
                let t: Vec<&str> = template.split('/').collect();
                t.len() == segments.len()
                    && t.iter()
                        .zip(&segments)
                        .all(|(a, b)| a == b || (a.starts_with('{') && a.ends_with('}')))
                    // A literal segment beats a parameter: /jobs/batch is not /jobs/{id}.
                    && !(t.last().is_some_and(|l| l.starts_with('{'))
                        && paths.contains_key(path))
            })
            .unwrap_or_else(|| panic!("{path} is not in the OpenAPI document"));
        item[method.as_str().to_lowercase()].clone()
    }

    /// Whether the document's request schema of `method path` takes `body`.
    pub fn schema_accepts(&self, method: &Method, path: &str, body: &Value) -> bool {
        let operation = self.operation(method, path);
        let schema = &operation["requestBody"]["content"]["application/json"]["schema"];
        assert!(!schema.is_null(), "{method} {path} takes no JSON body");
        let mut root = schema.as_object().cloned().unwrap_or_default();
        root.insert("components".into(), self.spec["components"].clone());
        jsonschema::validator_for(&Value::Object(root))
            .unwrap()
            .is_valid(body)
    }

    fn validate(&self, schema: &Value, instance: &Value, what: &str) {
        let mut root = schema.as_object().cloned().unwrap_or_default();
        root.insert("components".into(), self.spec["components"].clone());
        let validator = jsonschema::validator_for(&Value::Object(root))
            .unwrap_or_else(|e| panic!("{what}: the document's schema does not compile: {e}"));
        let errors: Vec<String> = validator
            .iter_errors(instance)
            .map(|e| format!("{e} at {}", e.instance_path))
            .collect();
        assert!(
            errors.is_empty(),
            "{what} does not match the OpenAPI document: {errors:?}\n{instance}"
        );
    }

    /// Total jobs of every state, from the stats endpoint.
    pub async fn total_jobs(&self) -> i64 {
        let (_, v) = self
            .call_as(Some(ADMIN), Method::GET, "/api/v1/stats", None)
            .await;
        v.as_object()
            .unwrap()
            .values()
            .flat_map(|s| s.as_object().unwrap().values())
            .map(|n| n.as_i64().unwrap())
            .sum()
    }

    pub async fn done(self) {
        self.db.drop_db().await;
    }
}

/// One test per backend for each named test function `async fn name(engine: Engine)`: SQLite,
/// and with the server tier PostgreSQL and MariaDB.
#[macro_export]
macro_rules! per_backend {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(backlog_testdb::Engine::Sqlite).await })*
        }
        backlog_testdb::with_servers! {
            mod postgres {
                $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() { super::$name(backlog_testdb::Engine::Postgres).await })*
            }
            mod mysql {
                $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() { super::$name(backlog_testdb::Engine::MySql).await })*
            }
        }
    };
}

/// `value` with each float that has no fraction written as an integer. JSON Schema counts `2.0`
/// an integer; jsonschema 0.33 does not where a type list allows null too (`["integer",
/// "null"]`), so requests a conforming client may send are read as the standard reads them.
fn whole_floats(value: Value) -> Value {
    match value {
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) && n.is_f64() => {
            let f = n.as_f64().unwrap();
            if f >= 0.0 && f <= u64::MAX as f64 {
                json!(f as u64)
            } else {
                json!(f as i64)
            }
        }
        Value::Array(items) => Value::Array(items.into_iter().map(whole_floats).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, whole_floats(v))).collect())
        }
        other => other,
    }
}
