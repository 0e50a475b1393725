//! The web dashboard: one page and its script and style sheet, compiled into the binary (no
//! CDN, nothing fetched at run time), served at `/` and `/assets/{file}`.
//!
//! The page needs no token to load: it holds no data. Everything it shows comes from the JSON
//! API, which it calls with `Authorization: Bearer TOKEN` from the token the user typed (kept
//! in `sessionStorage`). The dashboard never uses cookies, so a page on another site cannot make
//! the browser act as the user: a cross-site form or `fetch` carries no bearer header, and the
//! API answers it 401. That is the whole of the CSRF protection, and it is enough.
//!
//! Assets are revalidated on every load (`no-cache` with an `ETag`): their names carry no
//! version, so an upgraded binary must never be hidden behind a cached script.

use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// One embedded file.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const INDEX: Asset = Asset {
    name: "index.html",
    content_type: "text/html; charset=utf-8",
    body: include_str!("../assets/index.html"),
};

const ASSETS: &[Asset] = &[
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../assets/app.js"),
    },
    Asset {
        name: "app.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../assets/app.css"),
    },
];

/// Only this origin's script, style and API; no framing (clickjacking), no plugins. Inline
/// script and style attributes are refused too, so an injected string cannot run.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; \
                   frame-ancestors 'none'";

/// Each asset's ETag: a digest of its text, computed once.
static ETAGS: LazyLock<Vec<(&'static str, String)>> = LazyLock::new(|| {
    std::iter::once(&INDEX)
        .chain(ASSETS)
        .map(|a| {
            let digest = Sha256::digest(a.body.as_bytes());
            (a.name, format!("\"{}\"", hex::encode(&digest[..12])))
        })
        .collect()
});

fn respond(asset: &Asset, request: &HeaderMap) -> Response {
    let etag = ETAGS
        .iter()
        .find(|(n, _)| *n == asset.name)
        .map(|(_, e)| e.as_str())
        .expect("every asset has an ETag");
    let headers = [
        (header::CACHE_CONTROL, "no-cache"),
        (header::ETAG, etag),
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
    ];
    let fresh = request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim() == etag || t.trim() == "*");
    if fresh {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    let mut res = (headers, asset.body).into_response();
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    res
}

/// `GET /`: the dashboard's page.
pub async fn index(request: HeaderMap) -> Response {
    respond(&INDEX, &request)
}

/// `GET /assets/{file}`: its script and style sheet; 404 for any other name.
pub async fn asset(Path(file): Path<String>, request: HeaderMap) -> Response {
    match ASSETS.iter().find(|a| a.name == file) {
        Some(a) => respond(a, &request),
        None => (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "no such asset\n",
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;

    async fn get(app: &axum::Router, path: &str, etag: Option<&str>) -> (Response, String) {
        let mut req = Request::get(path);
        if let Some(e) = etag {
            req = req.header(header::IF_NONE_MATCH, e);
        }
        let res = app
            .clone()
            .oneshot(req.body(Body::empty()).unwrap())
            .await
            .unwrap();
        let (parts, body) = res.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes();
        (
            Response::from_parts(parts, Body::empty()),
            String::from_utf8(bytes.to_vec()).unwrap(),
        )
    }

    #[tokio::test]
    async fn serves_the_page_and_its_assets_with_types_and_etags() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("d.db").display());
        let client = Arc::new(backlog::Client::connect(&url).await.unwrap());
        let app = crate::router(
            client,
            &crate::ServerConfig::new("127.0.0.1:0".parse().unwrap()),
        );

        let (res, body) = get(&app, "/", None).await;
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(
            res.headers()[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        assert_eq!(res.headers()[header::CACHE_CONTROL], "no-cache");
        assert!(body.contains("/assets/app.js") && body.contains("/assets/app.css"));
        assert!(
            res.headers()[header::CONTENT_SECURITY_POLICY]
                .to_str()
                .unwrap()
                .contains("frame-ancestors 'none'")
        );

        for (path, ty, needle) in [
            ("/assets/app.js", "text/javascript", "sessionStorage"),
            ("/assets/app.css", "text/css", "font-family"),
        ] {
            let (res, body) = get(&app, path, None).await;
            assert_eq!(res.status(), StatusCode::OK, "{path}");
            let got = res.headers()[header::CONTENT_TYPE].to_str().unwrap();
            assert!(got.starts_with(ty), "{path}: {got}");
            assert!(body.contains(needle), "{path} lacks {needle}");
            // A browser that has it revalidates with the ETag and gets 304 and no body.
            let etag = res.headers()[header::ETAG].to_str().unwrap().to_owned();
            let (again, body) = get(&app, path, Some(&etag)).await;
            assert_eq!(again.status(), StatusCode::NOT_MODIFIED, "{path}");
            assert!(body.is_empty());
            let (stale, _) = get(&app, path, Some("\"old\"")).await;
            assert_eq!(stale.status(), StatusCode::OK, "{path}");
        }

        for path in ["/assets/nope.js", "/assets/..%2Fsrc%2Flib.rs"] {
            let (res, _) = get(&app, path, None).await;
            assert_eq!(res.status(), StatusCode::NOT_FOUND, "{path}");
        }
    }
}
