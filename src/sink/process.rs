//! The standard `process_*` metrics (the names and meanings Prometheus's own clients export),
//! read from `/proc` at each scrape by the `procfs` crate: CPU seconds, resident and virtual
//! memory, open and maximum file descriptors, threads and start time. prometheus-client has no
//! process collector; reading at scrape time costs nothing between scrapes. Off Linux, none.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

#[derive(Debug)]
pub struct Process;

impl Collector for Process {
    #[cfg(target_os = "linux")]
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        use procfs::WithCurrentSystemInfo;
        let Ok(me) = procfs::process::Process::myself() else {
            return Ok(());
        };
        let Ok(stat) = me.stat() else {
            return Ok(());
        };
        let ticks = procfs::ticks_per_second() as f64;
        let mut gauges = vec![
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                stat.rss_bytes().get() as f64,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                stat.vsize as f64,
            ),
            (
                "process_threads",
                "Number of OS threads in the process.",
                stat.num_threads as f64,
            ),
        ];
        gauges.extend(optional_gauges(&me, &stat, ticks));
        for (name, help, value) in gauges {
            let metric = ConstGauge::new(value);
            metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)?;
        }
        let cpu = ConstCounter::new((stat.utime + stat.stime) as f64 / ticks);
        let help = "Total user and system CPU time spent in seconds.";
        cpu.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            help,
            None,
            cpu.metric_type(),
        )?)
    }

    #[cfg(not(target_os = "linux"))]
    fn encode(&self, _encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        Ok(())
    }
}

/// The gauges only some systems give: the start time, open and maximum file descriptors.
#[cfg(target_os = "linux")]
fn optional_gauges(
    me: &procfs::process::Process,
    stat: &procfs::process::Stat,
    ticks: f64,
) -> Vec<(&'static str, &'static str, f64)> {
    let mut out = Vec::new();
    if let Ok(boot) = procfs::boot_time_secs() {
        let start = boot as f64 + stat.starttime as f64 / ticks;
        let help = "Start time of the process since the Unix epoch in seconds.";
        out.push(("process_start_time_seconds", help, start));
    }
    if let Ok(fds) = me.fd_count() {
        let help = "Number of open file descriptors.";
        out.push(("process_open_fds", help, fds as f64));
    }
    if let Ok(limits) = me.limits()
        && let procfs::process::LimitValue::Value(max) = limits.max_open_files.soft_limit
    {
        let help = "Maximum number of open file descriptors.";
        out.push(("process_max_fds", help, max as f64));
    }
    out
}
