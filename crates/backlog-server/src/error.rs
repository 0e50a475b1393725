//! API errors: a stable code, a message, and a status code that means what it says.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use backlog::{DbErrorKind, Error};
use serde::Serialize;
use utoipa::ToSchema;

/// The body of every error response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// An error's code and message.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// A stable, machine-readable code, for example `lease_lost` or `queue_name_invalid`.
    pub code: &'static str,
    /// A message for people.
    pub message: String,
    /// The job concerned, when there is one (for `unique_key_taken`: the job holding the key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<i64>,
}

/// An error as the API answers it.
#[derive(Debug)]
pub struct ApiError {
    /// The status code.
    pub status: StatusCode,
    /// The stable code.
    pub code: &'static str,
    /// The message.
    pub message: String,
    /// The job concerned, if any.
    pub job_id: Option<i64>,
}

impl ApiError {
    /// An error with a status, a code and a message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            job_id: None,
        }
    }

    /// 400 with a code.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// The job concerned.
    pub fn with_job(mut self, id: i64) -> Self {
        self.job_id = Some(id);
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message,
                job_id: self.job_id,
            },
        };
        let mut res = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            // What a client must send (RFC 9110 section 11.6.1).
            res.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer realm=\"backlog\""),
            );
        }
        res
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        use StatusCode as S;
        let (status, code) = match &e {
            Error::QueueNameInvalid { .. } => (S::BAD_REQUEST, "queue_name_invalid"),
            Error::KindInvalid { .. } => (S::BAD_REQUEST, "kind_invalid"),
            Error::UniqueKeyInvalid { .. } => (S::BAD_REQUEST, "unique_key_invalid"),
            Error::GroupKeyInvalid { .. } => (S::BAD_REQUEST, "group_key_invalid"),
            Error::TraceContextInvalid { .. } => (S::BAD_REQUEST, "trace_context_invalid"),
            Error::PayloadInvalid { .. } => (S::BAD_REQUEST, "payload_invalid"),
            Error::PayloadTooLarge { .. } => (S::PAYLOAD_TOO_LARGE, "payload_too_large"),
            Error::ValueOutOfRange { .. } => (S::BAD_REQUEST, "value_out_of_range"),
            Error::DurationInvalid { .. } => (S::BAD_REQUEST, "duration_invalid"),
            Error::StateInvalid { .. } => (S::BAD_REQUEST, "state_invalid"),
            Error::OptionInvalid { .. } => (S::BAD_REQUEST, "option_invalid"),
            Error::JobQueueMismatch { .. } => (S::BAD_REQUEST, "job_queue_mismatch"),
            Error::DependencyInvalid { .. } => (S::BAD_REQUEST, "dependency_invalid"),
            Error::ParentNotFound { .. } => (S::BAD_REQUEST, "parent_not_found"),
            Error::LeaseLost { job_id } => {
                return ApiError::new(S::CONFLICT, "lease_lost", e.to_string()).with_job(*job_id);
            }
            Error::JobNotFound { job_id } => {
                return ApiError::new(S::NOT_FOUND, "job_not_found", e.to_string())
                    .with_job(*job_id);
            }
            Error::JobStateConflict { job_id, .. } => {
                return ApiError::new(S::CONFLICT, "job_state_conflict", e.to_string())
                    .with_job(*job_id);
            }
            Error::Unsupported(_) => (S::NOT_IMPLEMENTED, "unsupported"),
            Error::SchemaOutdated { .. } => (S::SERVICE_UNAVAILABLE, "schema_outdated"),
            Error::Database { kind, .. } => match kind {
                DbErrorKind::UniqueViolation => (S::CONFLICT, "unique_key_taken"),
                DbErrorKind::ConnectionLost
                | DbErrorKind::LockTimeout
                | DbErrorKind::PoolTimeout => {
                    tracing::warn!(error = %e, "database unavailable");
                    return ApiError::new(
                        S::SERVICE_UNAVAILABLE,
                        "database_unavailable",
                        "the database cannot be reached or is busy; try again",
                    );
                }
                DbErrorKind::StorageUnavailable => {
                    tracing::error!(error = %e, "the database cannot write");
                    return ApiError::new(
                        S::SERVICE_UNAVAILABLE,
                        "database_unavailable",
                        "the database cannot write (a full disk or a read-only file); try \
                         again once an operator has freed space",
                    );
                }
                _ => {
                    // The driver's text can name tables and values: log it, answer plainly.
                    tracing::error!(error = %e, "database error");
                    return ApiError::new(
                        S::INTERNAL_SERVER_ERROR,
                        "database_error",
                        "the database reported an error (see the server's log)",
                    );
                }
            },
            _ => {
                tracing::error!(error = %e, "internal error");
                return ApiError::new(S::INTERNAL_SERVER_ERROR, "internal", "internal error");
            }
        };
        ApiError::new(status, code, e.to_string())
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        match r {
            JsonRejection::BytesRejection(b) if b.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "body_too_large",
                    "the request body is over the server's limit (serve --body-limit)",
                )
            }
            JsonRejection::MissingJsonContentType(_) => ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "content_type_invalid",
                "send the body as JSON with Content-Type: application/json",
            ),
            other => ApiError::bad_request("body_invalid", other.body_text()),
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        ApiError::bad_request("query_invalid", r.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        ApiError::bad_request("path_invalid", r.body_text())
    }
}

/// `Json` whose rejections are [`ApiError`]s (400 for a body that does not parse, 413 for one
/// over the limit) instead of axum's plain-text 422.
#[derive(Debug, axum::extract::FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct ApiJson<T>(pub T);

impl<T: Serialize> IntoResponse for ApiJson<T> {
    fn into_response(self) -> Response {
        Json(self.0).into_response()
    }
}

/// `Query` with [`ApiError`] rejections.
#[derive(Debug, axum::extract::FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);

/// `Path` with [`ApiError`] rejections.
#[derive(Debug, axum::extract::FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

/// A count option (`limit`, `minutes`, …): `default` when absent, else within `1..=max`.
pub fn count(what: &'static str, value: Option<u32>, default: u32, max: u32) -> ApiResult<u32> {
    let v = value.unwrap_or(default);
    if !(1..=max).contains(&v) {
        return Err(backlog::Error::ValueOutOfRange {
            what,
            value: v as i64,
            min: 1,
            max: max as i64,
        }
        .into());
    }
    Ok(v)
}

/// What handlers return.
pub type ApiResult<T> = Result<T, ApiError>;

/// A count in a JSON body as JSON Schema reads an integer: `5`, and `5.0` too (the document
/// types it `integer`, which admits both, so a client generated from it may send either).
/// Anything with a fraction, negative or too large is refused.
pub(crate) fn whole_number<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<u32>, D::Error> {
    use serde::Deserialize as _;
    let Some(n) = Option::<serde_json::Number>::deserialize(d)? else {
        return Ok(None);
    };
    let whole = n.as_u64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= f64::from(u32::MAX))
            .map(|f| f as u64)
    });
    whole
        .and_then(|w| u32::try_from(w).ok())
        .map(Some)
        .ok_or_else(|| serde::de::Error::custom(format!("{n} is not a whole number")))
}
