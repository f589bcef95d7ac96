//! Each request of a connection, as hyper's service: a place among the requests in flight,
//! its route (`route::door`, or the tunnel's inside an intercepted `CONNECT`), then the
//! request path (`stages::handle`) or the forward proxy's front.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use http::{Request, Response};
use hyper::body::Incoming;
use tokio::sync::OwnedSemaphorePermit;

use super::Sidecar;
use super::front::Front;
use super::outgoing::Peer;
use super::pool::Pools;
use super::route::{Door, Route};
use super::stages::handle;
use super::tee::ResponseBody;
use crate::listener::{Activity, Held};

/// Every request of a connection: a place among the requests in flight, held to the
/// response's last byte (only an HTTP/2 connection's extra streams ever wait for one), then its
/// route, fixed inside an intercepted tunnel, or the forward proxy's front (`CONNECT`, a host
/// no API serves).
#[derive(Clone)]
pub(super) struct Requests {
    s: Arc<Sidecar>,
    pools: Arc<Pools>,
    from: Peer,
    activity: Arc<Activity>,
    front: Option<Box<Front>>,
    /// The route of every request on this connection: an intercepted host's.
    fixed: Option<Route>,
}

impl Requests {
    pub fn new(
        s: &Arc<Sidecar>,
        pools: &Arc<Pools>,
        from: Peer,
        activity: &Arc<Activity>,
        front: Option<Front>,
    ) -> Requests {
        Requests {
            s: s.clone(),
            pools: pools.clone(),
            from,
            activity: activity.clone(),
            front: front.map(Box::new),
            fixed: None,
        }
    }

    /// The same service with every request on `route`, over TLS or (`tls` false) plain HTTP
    /// inside a `CONNECT`.
    pub fn inside(mut self, route: Route, tls: bool) -> Requests {
        self.fixed = Some(route);
        self.from.tls = tls;
        self
    }
}

type Answer = Response<Held<ResponseBody, OwnedSemaphorePermit>>;

impl hyper::service::Service<Request<Incoming>> for Requests {
    type Response = Answer;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Answer, Infallible>> + Send>>;

    fn call(&self, mut req: Request<Incoming>) -> Self::Future {
        let in_flight = self.activity.begin();
        let Requests {
            s,
            pools,
            from,
            front,
            fixed,
            ..
        } = self.clone();
        Box::pin(async move {
            let Ok(place) = s.requests.clone().acquire_owned().await else {
                unreachable!("the requests' semaphore is never closed");
            };
            let door = match fixed {
                Some(route) => Door::Api(route),
                None => super::route::door(&s, &mut req, front.is_some()),
            };
            let response = match (door, front) {
                (Door::Api(route), _) => {
                    let pool = &pools[route.api.index][route.upstream];
                    let Ok(response) = handle(s, route, pool, req, from).await;
                    response
                }
                (Door::Intercept(route, host), Some(front)) => {
                    front.intercept(&s, req, host, route)
                }
                (Door::Tunnel(host), Some(front)) => front.connect(&s, req, host).await,
                (Door::Pass(host), Some(front)) => front.pass(&s, req, host).await,
                (Door::Unopenable(why), _) => super::front::unopenable(&s, why),
                _ => super::front::no_api(&s, &req),
            };
            drop(in_flight);
            Ok(response.map(|body| Held::new(body, place)))
        })
    }
}
