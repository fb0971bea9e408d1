//! `bellc gateway`: the hosts' door to the fleet's store (see `bell_ops::gateway`).

use crate::args::GatewayArgs;
use crate::Failure;
use bell_ops::gateway::{limits::Limits, Config, Gateway, Listen};

pub fn exec(args: &GatewayArgs) -> Result<u8, Failure> {
    for (flag, value) in [
        ("--rate", args.rate),
        ("--burst", args.burst),
        ("--bytes-rate", args.bytes_rate),
    ] {
        if !(value.is_finite() && value > 0.0) {
            return Err(Failure::Usage(format!("`{flag}` is a number above 0")));
        }
    }
    if args.burst < 1.0 {
        return Err(Failure::Usage("`--burst` is at least 1".into()));
    }
    let out = bell_ops::serve::Out::parse(&args.out).map_err(Failure::Usage)?;
    let trust = bell_ops::fleet::trusted::load(&args.trust)?;
    let etcd = bell_store::Etcd::open(&args.store, &args.tls.access())?;
    let limits = Limits {
        requests_per_second: args.rate,
        request_burst: args.burst,
        bytes_per_second: args.bytes_rate,
        byte_burst: args.bytes_rate * 16.0,
        max_value: args.max_value,
    };
    let gateway = Gateway::new(Config {
        out,
        trust,
        etcd,
        lock_prefix: args.lock_prefix.clone(),
        limits,
        cache: true,
        throttled_after: std::time::Duration::from_secs(args.throttled_after),
    });
    let listen = Listen {
        address: args.listen.clone(),
        cert: args.tls_cert.clone(),
        key: args.tls_key.clone(),
        refresh: args.refresh,
    };
    let store = args.store.clone();
    bell_ops::gateway::run(gateway, &listen, |address| {
        eprintln!("bellc gateway: on https://{address}/ for the hosts (store {store})");
    })?;
    Ok(0)
}
