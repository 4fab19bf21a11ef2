//! The engine's configuration in human units (serde), validated by
//! [`QosEngine::new`](crate::QosEngine::new) into a running engine. Every rejection names
//! its key, e.g. `classes[2].meter.pir_bps`.
//!
//! ```toml
//! link_rate_bps = 5_000_000
//! [scheduler]
//! mode = "wrr"
//! [shaper]
//! rate_bps = 5_000_000
//! overhead_bytes = 0
//! [classifier]
//! default_class = "af3"
//! [[classes]]
//! name = "af1"
//! weight = 1
//! buffer = { rule = "fixed", packets = 100 }
//! meter = { kind = "trtcm", cir_bps = 500_000, cbs_bytes = 3000, pir_bps = 600_000, pbs_bytes = 3000 }
//! aqm = { kind = "sojourn" }
//! ```

use serde::{Deserialize, Serialize};
use zl_aqm::AqmParams;

use crate::classify::{DscpRule, DscpSpec};
use crate::meter::MeterParams;
use crate::sched::SchedMode;
use crate::shaper::ShaperParams;
use crate::sizing::BufferRule;

fn default_max_packets() -> u32 {
    1000
}

fn default_class_name() -> String {
    "be".to_string()
}

fn yes() -> bool {
    true
}

/// One AQM policy per color.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ByColor<T> {
    /// For green packets.
    pub green: T,
    /// For yellow packets.
    pub yellow: T,
    /// For red packets.
    pub red: T,
}

/// One traffic class.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassParams {
    /// The class's name; the standard DSCP table maps to `ef`, `af1`..`af4`, `cs1`..`cs7`, `be`.
    pub name: String,
    /// Round-robin quantum: packets per round (WRR) or bytes per round (DRR).
    /// Exactly one of `weight` and `strict_rank` is set.
    #[serde(default)]
    pub weight: Option<u32>,
    /// Strict priority above every weighted class; lower rank first.
    #[serde(default)]
    pub strict_rank: Option<u32>,
    /// Ring size: the most packets the queue can ever hold (allocated once).
    #[serde(default = "default_max_packets")]
    pub max_packets: u32,
    /// Capacity rule; default `fixed` at `max_packets`.
    #[serde(default)]
    pub buffer: Option<BufferRule>,
    /// Three-color meter; none = every packet keeps its incoming color.
    #[serde(default)]
    pub meter: Option<MeterParams>,
    /// Police: drop red packets on arrival (counted as forced drops), as a strict-priority
    /// class must be to keep it from starving the others (RFC 3246 §2.1). Default false.
    #[serde(default)]
    pub drop_red: bool,
    /// DSCP written for green, yellow, red after metering. Default: AFx1/AFx2/AFx3 for a
    /// metered class named `afx`, no re-marking otherwise.
    #[serde(default)]
    pub remark: Option<[DscpSpec; 3]>,
    /// One AQM policy for all colors (it sees each packet's color). Default tail drop.
    #[serde(default)]
    pub aqm: Option<AqmParams>,
    /// One AQM policy per color instead (each sees only its color's arrivals).
    #[serde(default)]
    pub aqm_by_color: Option<ByColor<AqmParams>>,
}

impl ClassParams {
    /// A weighted class with tail drop, no meter, a fixed buffer of `max_packets`.
    pub fn weighted(name: &str, weight: u32, max_packets: u32) -> Self {
        ClassParams {
            name: name.to_string(),
            weight: Some(weight),
            strict_rank: None,
            max_packets,
            buffer: None,
            meter: None,
            drop_red: false,
            remark: None,
            aqm: None,
            aqm_by_color: None,
        }
    }

    /// A strict-priority class (rank 0) otherwise like [`ClassParams::weighted`].
    pub fn strict(name: &str, max_packets: u32) -> Self {
        ClassParams {
            weight: None,
            strict_rank: Some(0),
            ..ClassParams::weighted(name, 1, max_packets)
        }
    }
}

/// DSCP classification.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassifierParams {
    /// Where unmapped and unparsable packets go. Default `be`.
    #[serde(default = "default_class_name")]
    pub default_class: String,
    /// Start from the standard table (AFxy -> `afx`, EF -> `ef`, CSn -> `csn`, CS0 -> `be`).
    #[serde(default = "yes")]
    pub standard: bool,
    /// Explicit entries, applied over the standard table.
    #[serde(default)]
    pub dscp: Vec<DscpRule>,
}

impl Default for ClassifierParams {
    fn default() -> Self {
        ClassifierParams {
            default_class: default_class_name(),
            standard: true,
            dscp: Vec::new(),
        }
    }
}

/// Scheduler choice.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerParams {
    /// WRR (quantum in packets, default) or DRR (quantum in bytes).
    #[serde(default)]
    pub mode: SchedMode,
}

/// The whole QoS configuration of one egress port.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QosParams {
    /// The egress link rate in bits/s (AQM idle decay); default: the shaper's rate.
    #[serde(default)]
    pub link_rate_bps: Option<u64>,
    /// The classes, each with its queue, meter, AQM and scheduling share.
    pub classes: Vec<ClassParams>,
    /// DSCP -> class mapping.
    #[serde(default)]
    pub classifier: ClassifierParams,
    /// How the weighted classes share the link.
    #[serde(default)]
    pub scheduler: SchedulerParams,
    /// Egress shaper; none = the link itself paces dequeues.
    #[serde(default)]
    pub shaper: Option<ShaperParams>,
}

impl QosParams {
    /// What the port's Zombie List observes each packet by: its flow, or its source or
    /// destination host where a ZL-RED class isolates by host (`isolation.by`); with the key
    /// that set it. decided: one port has one list, so its ZL-RED classes' `by` must agree
    /// (two that differ are an error naming both keys).
    pub fn zombie_key(&self) -> Result<(zl_aqm::IsolateBy, Option<String>), crate::QosConfigError> {
        let mut found: Option<(zl_aqm::IsolateBy, String)> = None;
        for (i, c) in self.classes.iter().enumerate() {
            let Some(AqmParams::ZlRed(p)) = &c.aqm else {
                continue;
            };
            let Some(iso) = &p.isolation else { continue };
            let key = format!("classes[{i}].aqm.isolation.by");
            match &found {
                None => found = Some((iso.by, key)),
                Some((by, first)) if *by != iso.by => {
                    return Err(crate::QosConfigError::new(
                        key,
                        format!(
                            "`{}` differs from `{first}` = `{}`: the port's ZL-RED classes share \
                             its Zombie List, which observes every packet by one key",
                            iso.by.name(),
                            by.name()
                        ),
                    ))
                }
                Some(_) => {}
            }
        }
        Ok(match found {
            Some((by, key)) => (by, Some(key)),
            None => (zl_aqm::IsolateBy::Flow, None),
        })
    }

    /// The Zombie List configuration of this port's SRED and ZL-RED policies, with the key it
    /// was read from (`classes[i].aqm.zombie`, `classes[i].aqm_by_color.<color>.zombie`);
    /// `Ok(None)` when no class uses one.
    ///
    /// decided: one port has one Zombie List (the paper keeps one per output link), so when
    /// its policies share one list (`QosEngine::with_zombie_list`) their `zombie` settings
    /// must agree; two that differ are an error naming both keys.
    pub fn zombie_params(
        &self,
    ) -> Result<Option<(String, zl_zombie::ZombieParams)>, crate::QosConfigError> {
        let mut found: Option<(String, zl_zombie::ZombieParams)> = None;
        for (i, c) in self.classes.iter().enumerate() {
            let shared = c.aqm.iter().map(|a| (format!("classes[{i}].aqm"), a));
            let by_color = c.aqm_by_color.iter().flat_map(|b| {
                [("green", &b.green), ("yellow", &b.yellow), ("red", &b.red)]
                    .map(|(color, a)| (format!("classes[{i}].aqm_by_color.{color}"), a))
            });
            for (key, aqm) in shared.chain(by_color) {
                let zp = match aqm {
                    AqmParams::Sred(p) => p.zombie,
                    AqmParams::ZlRed(p) => p.zombie,
                    _ => continue,
                };
                let key = format!("{key}.zombie");
                match &found {
                    None => found = Some((key, zp)),
                    Some((first, fp)) if *fp != zp => {
                        return Err(crate::QosConfigError::new(
                            key,
                            format!(
                                "{zp:?} differs from `{first}` = {fp:?}: the SRED / ZL-RED \
                                 policies of one port share its Zombie List, so their `zombie` \
                                 settings must be equal"
                            ),
                        ))
                    }
                    Some(_) => {}
                }
            }
        }
        Ok(found)
    }
}
