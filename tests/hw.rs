//! The hardware path without hardware: the fake device behind the verbs table, the hardware
//! store under the engine (polled waits, the fd watcher, visibility delay), attach, detection,
//! and loading the real libibverbs builds (absent, Debian's 44, the built 65).

mod common;

use common::until;
use parking_lot::Mutex;
use rscntr::engine::{Counter, Timeout, TryWaitError, Tuning, WaitError, WaitStrategy, watcher};
use rscntr::verbs::abi::*;
use rscntr::verbs::fake::{self, FAKE_API, FakeConfig, call};
use rscntr::verbs::{
    CounterKind, Device, HwCounter, HwError, LoadError, load, op_mask_from_bind_flags,
};
use std::os::fd::RawFd;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// Tests that install fake device lists or count watcher passes run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

const ALL_WAITABLE: [WaitStrategy; 3] =
    [WaitStrategy::Yield, WaitStrategy::Block, WaitStrategy::Fd];

fn device(config: &str) -> Arc<Device> {
    let _g = SERIAL.lock();
    let api = fake::install(FakeConfig::parse(config).expect("config"));
    Device::open(api, None).expect("fake device")
}

fn hw_counter(dev: &Arc<Device>, s: WaitStrategy) -> Arc<Counter<HwCounter>> {
    let store = dev.create_counter(CounterKind::Wrs).expect("create");
    Counter::with_store(store, s, Tuning::default()).expect("counter")
}

fn readable(fd: RawFd, timeout_ms: i32) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    n == 1 && pfd.revents & libc::POLLIN != 0
}

fn raw(c: &Counter<HwCounter>) -> *mut IbvCompCntr {
    c.store().raw()
}

#[test]
fn config_parsing() {
    let c = FakeConfig::parse("devices=2, counterless=1,delay_us=500,max_counters=3,max_value=0xff,bytes=ok,attach_ops=3,fail=read+inc,errno=12").unwrap();
    assert_eq!(c.devices, 2);
    assert_eq!(c.counterless, 1);
    assert_eq!(c.delay, Duration::from_micros(500));
    assert_eq!(
        (c.max_counters, c.max_value, c.bytes, c.attach_ops),
        (3, 255, true, 3)
    );
    assert_eq!((c.fail, c.errno), (call::READ | call::INC, 12));
    assert_eq!(FakeConfig::parse("").unwrap(), FakeConfig::default());
    assert_eq!(FakeConfig::parse("1").unwrap(), FakeConfig::default());
    assert_eq!(FakeConfig::parse("fail=all").unwrap().fail, call::ALL);
    for bad in [
        "nokey",
        "devices=x",
        "bytes=maybe",
        "fail=frobnicate",
        "colour=blue",
    ] {
        assert!(FakeConfig::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn every_store_op_reaches_the_device() {
    let dev = device("");
    let c = hw_counter(&dev, WaitStrategy::Block);
    assert_eq!((c.read(), c.read_err()), (0, 0));
    c.add(5).unwrap();
    c.add(7).unwrap();
    assert_eq!(c.read(), 12);
    c.add_err(2).unwrap();
    assert_eq!(c.read_err(), 2);
    c.set(40).unwrap();
    c.set_err(9).unwrap();
    assert_eq!((c.read(), c.read_err()), (40, 9));
    // SAFETY: a live fake counter.
    unsafe { fake::device_add(raw(&c), 2) };
    assert_eq!(c.read(), 42, "device-side completions are read back");
    c.set(u64::MAX).unwrap();
    c.add(2).unwrap();
    assert_eq!(c.read(), 1, "max_value 2^64-1 wraps modulo 2^64");
}

#[test]
fn a_smaller_max_value_wraps_there_and_refuses_larger_sets() {
    let dev = device("max_value=1000");
    assert_eq!(dev.caps().max_value, 1000);
    let c = hw_counter(&dev, WaitStrategy::None);
    c.set(999).unwrap();
    c.add(3).unwrap();
    assert_eq!(c.read(), 1, "999 + 3 wraps past 1000 to 0, then 1");
    assert_eq!(c.set(1001), Err(rscntr::engine::StoreError(libc::EINVAL)));
}

#[test]
fn bytes_counters_are_refused_like_efa_unless_configured() {
    let dev = device("");
    let e = dev.create_counter(CounterKind::Bytes).unwrap_err();
    assert_eq!(
        e,
        HwError {
            call: "ibv_create_comp_cntr",
            errno: libc::EOPNOTSUPP
        }
    );
    assert_eq!(
        dev.live_counters(),
        0,
        "a refused create leaves no count behind"
    );
    let dev = device("bytes=ok");
    assert_eq!(
        dev.create_counter(CounterKind::Bytes).unwrap().kind(),
        CounterKind::Bytes
    );
}

#[test]
fn out_of_counters() {
    // The device's own limit (ENOMEM after N) and rscntr's check of max_counters (ENOSPC,
    // without a device call) are both reported.
    let ctx = fake::open_context(FakeConfig {
        max_counters: 2,
        ..Default::default()
    });
    let mut attr = IbvCompCntrInitAttr::default();
    // SAFETY: a fake context and a zeroed WRS attr.
    let made: Vec<_> = (0..2)
        .map(|_| unsafe { (FAKE_API.create_comp_cntr)(ctx, &mut attr) })
        .collect();
    assert!(made.iter().all(|p| !p.is_null()));
    // SAFETY: as above.
    assert!(unsafe { (FAKE_API.create_comp_cntr)(ctx, &mut attr) }.is_null());
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::ENOMEM)
    );
    for p in made {
        // SAFETY: live, unattached fake counters.
        assert_eq!(unsafe { (FAKE_API.destroy_comp_cntr)(p) }, 0);
    }
    // SAFETY: the context opened above.
    unsafe { (FAKE_API.close_device)(ctx) };

    let dev = device("max_counters=2");
    let a = dev.create_counter(CounterKind::Wrs).unwrap();
    let _b = dev.create_counter(CounterKind::Wrs).unwrap();
    assert_eq!(
        dev.create_counter(CounterKind::Wrs).unwrap_err(),
        HwError {
            call: "max_counters",
            errno: libc::ENOSPC
        }
    );
    drop(a);
    assert_eq!(dev.live_counters(), 1, "dropping destroys");
    dev.create_counter(CounterKind::Wrs)
        .expect("a slot was freed");
}

#[test]
fn every_call_can_fail() {
    // Detection: list, open, caps.
    for (fail, why) in [
        ("list", "ibv_get_device_list"),
        ("open", "ibv_open_device"),
        ("caps", "no completion counters"),
    ] {
        let _g = SERIAL.lock();
        let api = fake::install(FakeConfig::parse(&format!("fail={fail}")).unwrap());
        let e = Device::open(api, None).unwrap_err();
        assert!(e.contains(why), "fail={fail}: {e}");
    }
    // Counter calls: create through the device layer, the rest on a raw fake counter.
    let dev = device("fail=create,errno=5");
    assert_eq!(
        dev.create_counter(CounterKind::Wrs).unwrap_err().errno,
        libc::EIO
    );
    assert_eq!(dev.live_counters(), 0);
    let ctx = fake::open_context(FakeConfig {
        fail: call::READ | call::INC | call::SET | call::DESTROY | call::ATTACH,
        ..Default::default()
    });
    let mut attr = IbvCompCntrInitAttr::default();
    let mut v = 0;
    // SAFETY: a fake context, a zeroed attr, then a live fake counter, a u64 and a fake QP.
    unsafe {
        let p = (FAKE_API.create_comp_cntr)(ctx, &mut attr);
        assert!(!p.is_null());
        assert_eq!((FAKE_API.read_comp_cntr)(p, &mut v), libc::EIO);
        assert_eq!((FAKE_API.read_err_comp_cntr)(p, &mut v), libc::EIO);
        assert_eq!((FAKE_API.inc_comp_cntr)(p, 1), libc::EIO);
        assert_eq!((FAKE_API.inc_err_comp_cntr)(p, 1), libc::EIO);
        assert_eq!((FAKE_API.set_comp_cntr)(p, 1), libc::EIO);
        assert_eq!((FAKE_API.set_err_comp_cntr)(p, 1), libc::EIO);
        let qp = fake::create_qp(ctx);
        let mut a = IbvQpAttachCompCntrAttr {
            comp_mask: 0,
            op_mask: 1,
        };
        assert_eq!((FAKE_API.qp_attach_comp_cntr)(qp, p, &mut a), libc::EIO);
        fake::destroy_qp(qp);
        assert_eq!((FAKE_API.destroy_comp_cntr)(p), libc::EIO);
    }
}

#[test]
fn failing_reads_and_updates_through_the_store() {
    let ctx_config = FakeConfig {
        fail: call::READ | call::INC | call::SET,
        ..Default::default()
    };
    let dev = {
        let _g = SERIAL.lock();
        let api = fake::install(FakeConfig {
            devices: 1,
            ..ctx_config.clone()
        });
        Device::open(api, None).unwrap()
    };
    let c = hw_counter(&dev, WaitStrategy::Block);
    assert_eq!(c.add(1).unwrap_err().0, libc::EIO);
    assert_eq!(c.add_err(1).unwrap_err().0, libc::EIO);
    assert_eq!(c.set(1).unwrap_err().0, libc::EIO);
    assert_eq!(c.set_err(1).unwrap_err().0, libc::EIO);
    assert_eq!(
        (c.read(), c.read_err()),
        (0, 0),
        "failed reads return the last good value"
    );
    assert_eq!(
        c.wait(1, Timeout::from_ms(20)),
        Err(WaitError::TimedOut),
        "and waits time out"
    );
}

#[test]
fn destroy_while_attached_is_ebusy_until_the_qp_goes() {
    let dev = device("");
    let c = hw_counter(&dev, WaitStrategy::Block);
    let ctx = c.store().raw();
    // SAFETY: a live fake counter; its context field is the fake context.
    let qp = fake::create_qp(unsafe { (*ctx).context });
    // SAFETY: a fake QP on the device's context.
    unsafe { dev.attach(qp, c.store(), IBV_QP_ATTACH_COMP_CNTR_OP_SEND) }.unwrap();
    assert_eq!(c.store().attachments(), 1);
    assert_eq!(c.store().destroy().unwrap_err().errno, libc::EBUSY);
    c.add(1).unwrap();
    assert_eq!(c.read(), 1, "still usable after a refused destroy");
    // SAFETY: the fake QP made above, its counter alive.
    unsafe { fake::destroy_qp(qp) };
    dev.forget_qp(qp);
    assert_eq!(c.store().attachments(), 0);
    c.store().destroy().unwrap();
    assert!(c.store().raw().is_null());
    c.store().destroy().unwrap();
}

#[test]
fn the_fake_device_itself_refuses_destroy_while_attached() {
    let ctx = fake::open_context(FakeConfig::default());
    let mut attr = IbvCompCntrInitAttr::default();
    // SAFETY: fake context, counter and QP throughout.
    unsafe {
        let p = (FAKE_API.create_comp_cntr)(ctx, &mut attr);
        let qp = fake::create_qp(ctx);
        let mut a = IbvQpAttachCompCntrAttr {
            comp_mask: 0,
            op_mask: IBV_QP_ATTACH_COMP_CNTR_OP_RECV,
        };
        assert_eq!((FAKE_API.qp_attach_comp_cntr)(qp, p, &mut a), 0);
        assert_eq!((FAKE_API.destroy_comp_cntr)(p), libc::EBUSY);
        fake::destroy_qp(qp);
        assert_eq!((FAKE_API.destroy_comp_cntr)(p), 0);
        (FAKE_API.close_device)(ctx);
    }
}

#[test]
fn bind_flags_map_to_attach_ops() {
    use rscntr::ofi;
    let f = |x: u32| x as u64;
    assert_eq!(
        op_mask_from_bind_flags(f(ofi::FI_SEND)),
        Ok(IBV_QP_ATTACH_COMP_CNTR_OP_SEND)
    );
    assert_eq!(
        op_mask_from_bind_flags(f(ofi::FI_TRANSMIT)),
        Ok(IBV_QP_ATTACH_COMP_CNTR_OP_SEND)
    );
    assert_eq!(
        op_mask_from_bind_flags(f(ofi::FI_RECV)),
        Ok(IBV_QP_ATTACH_COMP_CNTR_OP_RECV)
    );
    assert_eq!(
        op_mask_from_bind_flags(f(ofi::FI_READ)),
        Ok(IBV_QP_ATTACH_COMP_CNTR_OP_RDMA_READ)
    );
    assert_eq!(
        op_mask_from_bind_flags(f(ofi::FI_WRITE)),
        Ok(IBV_QP_ATTACH_COMP_CNTR_OP_RDMA_WRITE)
    );
    assert_eq!(
        op_mask_from_bind_flags(f(ofi::FI_REMOTE_READ)),
        Ok(IBV_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_READ)
    );
    assert_eq!(
        op_mask_from_bind_flags(f(ofi::FI_REMOTE_WRITE)),
        Ok(IBV_QP_ATTACH_COMP_CNTR_OP_REMOTE_RDMA_WRITE)
    );
    let all = f(ofi::FI_SEND
        | ofi::FI_RECV
        | ofi::FI_READ
        | ofi::FI_WRITE
        | ofi::FI_REMOTE_READ
        | ofi::FI_REMOTE_WRITE);
    assert_eq!(
        op_mask_from_bind_flags(all),
        Ok(IBV_QP_ATTACH_COMP_CNTR_OP_ALL)
    );
    assert_eq!(op_mask_from_bind_flags(0), Ok(0));
    assert_eq!(op_mask_from_bind_flags(1 << 40), Err(1 << 40));
}

#[test]
fn attach_checks_masks_overlap_support_and_qp_state() {
    let dev = device("attach_ops=0x13"); // SEND, RECV, RDMA_WRITE
    let tx = hw_counter(&dev, WaitStrategy::None);
    let rx = hw_counter(&dev, WaitStrategy::None);
    let ctx = unsafe { (*tx.store().raw()).context };
    let qp = fake::create_qp(ctx);
    // SAFETY (every attach below): fake QPs on this device's context.
    unsafe {
        let e = |r: Result<(), HwError>| r.map_err(|e| e.errno);
        assert_eq!(
            e(dev.attach(qp, tx.store(), 0)),
            Err(libc::EINVAL),
            "empty mask"
        );
        assert_eq!(
            e(dev.attach(qp, tx.store(), 1 << 6)),
            Err(libc::EINVAL),
            "unknown bit"
        );
        assert_eq!(
            e(dev.attach(qp, tx.store(), IBV_QP_ATTACH_COMP_CNTR_OP_RDMA_READ)),
            Err(libc::EOPNOTSUPP),
            "unsupported op"
        );
        assert_eq!(
            e(dev.attach(std::ptr::null_mut(), tx.store(), 1)),
            Err(libc::EINVAL)
        );
        let send_write = IBV_QP_ATTACH_COMP_CNTR_OP_SEND | IBV_QP_ATTACH_COMP_CNTR_OP_RDMA_WRITE;
        assert_eq!(e(dev.attach(qp, tx.store(), send_write)), Ok(()));
        assert_eq!(
            e(dev.attach(
                qp,
                rx.store(),
                IBV_QP_ATTACH_COMP_CNTR_OP_RECV | IBV_QP_ATTACH_COMP_CNTR_OP_SEND
            )),
            Err(libc::EBUSY),
            "overlaps the tx counter's SEND"
        );
        assert_eq!(
            e(dev.attach(qp, rx.store(), IBV_QP_ATTACH_COMP_CNTR_OP_RECV)),
            Ok(())
        );
        // One counter on many QPs is fine; a QP past INIT is refused by the device.
        let qp2 = fake::create_qp(ctx);
        assert_eq!(
            e(dev.attach(qp2, tx.store(), IBV_QP_ATTACH_COMP_CNTR_OP_SEND)),
            Ok(())
        );
        assert_eq!(tx.store().attachments(), 2);
        let qp3 = fake::create_qp(ctx);
        fake::qp_to_rts(qp3);
        assert_eq!(
            e(dev.attach(qp3, rx.store(), IBV_QP_ATTACH_COMP_CNTR_OP_SEND)),
            Err(libc::EINVAL)
        );
        for q in [qp, qp2, qp3] {
            fake::destroy_qp(q);
            dev.forget_qp(q);
        }
    }
    assert_eq!((tx.store().attachments(), rx.store().attachments()), (0, 0));
}

#[test]
fn device_selection() {
    let _g = SERIAL.lock();
    let api = fake::install(FakeConfig::parse("devices=3,counterless=1").unwrap());
    assert_eq!(
        Device::open(api, None).unwrap().name(),
        "fake1",
        "first device with counters"
    );
    assert_eq!(
        Device::open(api, Some("fake2")).unwrap().name(),
        "fake2",
        "FI_RSCNTR_DEVICE"
    );
    let e = Device::open(api, Some("fake0")).unwrap_err();
    assert!(
        e.contains("fake0: no completion counters (max_counters 0)"),
        "{e}"
    );
    let e = Device::open(api, Some("mlx5_0")).unwrap_err();
    assert!(e.contains("not FI_RSCNTR_DEVICE"), "{e}");
    let api = fake::install(FakeConfig::parse("devices=0").unwrap());
    assert_eq!(Device::open(api, None).unwrap_err(), "no RDMA device");
}

#[test]
fn waiters_see_device_side_changes_by_polling() {
    let dev = device("");
    for s in ALL_WAITABLE {
        let c = hw_counter(&dev, s);
        let p = raw(&c) as usize;
        let t = thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            // SAFETY: the counter outlives the join below.
            unsafe { fake::device_add(p as *mut IbvCompCntr, 3) };
        });
        assert_eq!(c.wait(3, Timeout::from_ms(10_000)), Ok(()), "{s:?}");
        t.join().unwrap();
        // Errors made by the device end a wait with ErrorChanged: the device errs once the
        // wait has begun (a sleep would race with a late start on a loaded machine).
        let began = Arc::new(std::sync::Barrier::new(2));
        let began2 = began.clone();
        let t = thread::spawn(move || {
            began2.wait();
            // SAFETY: as above.
            unsafe { fake::device_add_err(p as *mut IbvCompCntr, 1) };
        });
        assert_eq!(
            c.wait_observed(100, Timeout::from_ms(10_000), || {
                began.wait();
            }),
            Err(WaitError::ErrorChanged),
            "{s:?}"
        );
        t.join().unwrap();
        assert!(!c.has_waiters());
    }
}

#[test]
fn software_mutations_of_hardware_counters_wake_at_once() {
    let dev = device("");
    let c = hw_counter(&dev, WaitStrategy::Block);
    let c2 = c.clone();
    let t = thread::spawn(move || c2.wait(2, Timeout::from_ms(10_000)));
    thread::sleep(Duration::from_millis(20));
    c.add(2).unwrap();
    assert_eq!(t.join().unwrap(), Ok(()));
}

#[test]
fn waits_stay_correct_when_reads_lag() {
    let dev = device("delay_us=20000");
    for s in ALL_WAITABLE {
        let c = hw_counter(&dev, s);
        c.add(5).unwrap();
        assert_eq!(c.read(), 0, "{s:?}: not visible yet (20 ms delay)");
        assert_eq!(c.wait(5, Timeout::Poll), Err(WaitError::TimedOut));
        let start = Instant::now();
        assert_eq!(c.wait(5, Timeout::from_ms(10_000)), Ok(()), "{s:?}");
        assert!(start.elapsed() >= Duration::from_millis(10), "{s:?}");
        assert_eq!(c.read(), 5);
        // A timeout shorter than the lag times out, then the value arrives.
        c.add(1).unwrap();
        assert_eq!(
            c.wait(6, Timeout::from_ms(2)),
            Err(WaitError::TimedOut),
            "{s:?}"
        );
        assert_eq!(c.wait(6, Timeout::Never), Ok(()), "{s:?}");
    }
}

#[test]
fn the_watcher_signals_an_armed_fd_on_device_changes() {
    let _g = SERIAL.lock();
    let api = fake::install(FakeConfig::parse("delay_us=5000").unwrap());
    let dev = Device::open(api, None).unwrap();
    let c = hw_counter(&dev, WaitStrategy::Fd);
    let fd = c.fd().unwrap();
    assert_eq!(c.trywait(), Ok(()));
    assert_eq!(watcher::stats().0, 1, "armed");
    assert!(!readable(fd, 0));
    // SAFETY: a live fake counter.
    unsafe { fake::device_add(raw(&c), 1) };
    assert!(
        readable(fd, 10_000),
        "the watcher did not signal the device's change"
    );
    assert_eq!(watcher::stats().0, 0, "one signal per arming");
    assert_eq!(c.read(), 1);
    assert_eq!(c.trywait(), Err(TryWaitError::Pending));
    assert!(!readable(fd, 0), "trywait drained");
    assert_eq!(c.trywait(), Ok(()));
    // SAFETY: as above.
    unsafe { fake::device_add_err(raw(&c), 1) };
    assert!(readable(fd, 10_000), "error changes signal too");
    // A software add signals without the watcher.
    assert_eq!(c.trywait(), Err(TryWaitError::Pending));
    assert_eq!(c.trywait(), Ok(()));
    c.add(1).unwrap();
    assert!(readable(fd, 0), "software add signals at once");
    // The add is not visible for 5 ms: a trywait now sees no change and arms; the watcher
    // then signals when the add shows up.
    if c.trywait() == Ok(()) {
        assert!(readable(fd, 10_000), "the lagging add was never signalled");
        assert_eq!(c.trywait(), Err(TryWaitError::Pending));
    }
    assert_eq!(c.read(), 2);
    // Closing takes the counter off the watcher before the store goes.
    let _ = c.trywait();
    assert!(c.unwatch());
    assert_eq!(watcher::stats().0, 0);
}

#[test]
fn a_parked_watcher_costs_nothing() {
    let _g = SERIAL.lock();
    let api = fake::install(FakeConfig::default());
    let dev = Device::open(api, None).unwrap();
    // Counters nobody armed are never polled, and with nothing armed the watcher parks.
    let idle: Vec<_> = (0..8).map(|_| hw_counter(&dev, WaitStrategy::Fd)).collect();
    let c = hw_counter(&dev, WaitStrategy::Fd);
    assert_eq!(c.trywait(), Ok(()));
    c.add(1).unwrap();
    // The add signalled the fd; the watcher forgets the counter on its next pass and parks.
    until("the signalled counter left the watcher", || {
        watcher::stats().0 == 0
    });
    let (_, running, passes) = watcher::stats();
    assert!(running);
    thread::sleep(Duration::from_millis(50));
    assert_eq!(
        watcher::stats().2,
        passes,
        "the watcher polled with nothing armed"
    );
    drop(idle);
}

#[test]
fn dropping_an_armed_counter_is_safe() {
    let _g = SERIAL.lock();
    let api = fake::install(FakeConfig::default());
    let dev = Device::open(api, None).unwrap();
    for i in 0..50 {
        let c = hw_counter(&dev, WaitStrategy::Fd);
        let passes = watcher::stats().2;
        let _ = c.trywait();
        if i % 2 == 1 {
            // Dropped while the watcher may hold it for a pass.
            until("the watcher polled the armed counter", || {
                watcher::stats().2 > passes
            });
        }
        drop(c);
        // An armed counter takes itself off the watcher when its last reference goes, which
        // may be the watcher's own, let go at the end of its pass.
        until("the dropped counter left the watcher", || {
            watcher::stats().0 == 0
        });
    }
    until("the device counters were destroyed", || {
        dev.live_counters() == 0
    });
}

#[test]
fn threads_adding_to_a_hardware_counter_are_exact() {
    let dev = device("");
    let c = hw_counter(&dev, WaitStrategy::Block);
    let p = raw(&c) as usize;
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let c = c.clone();
            thread::spawn(move || {
                for _ in 0..20_000 {
                    if i % 2 == 0 {
                        c.add(1).unwrap();
                    } else {
                        // SAFETY: the counter outlives the joins.
                        unsafe { fake::device_add(p as *mut IbvCompCntr, 1) };
                    }
                }
            })
        })
        .collect();
    assert_eq!(c.wait(80_000, Timeout::from_ms(60_000)), Ok(()));
    handles.into_iter().for_each(|h| h.join().unwrap());
    assert_eq!(c.read(), 80_000);
}

// ---- the real libraries ----------------------------------------------------------------------

fn rdma65() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".deps/rdma65/lib/libibverbs.so.1")
}

#[test]
fn loading_an_absent_library() {
    match load("/nonexistent/libibverbs.so.1") {
        Err(LoadError::NoLibrary(why)) => assert!(why.contains("cannot load"), "{why}"),
        other => panic!("{other:?}"),
    }
    match load("libc.so.6") {
        Err(LoadError::NotVerbs(why)) => assert!(why.contains("not a libibverbs"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn loading_debian_libibverbs_44() {
    let path = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1";
    if !std::path::Path::new(path).exists() {
        assert!(
            std::env::var_os("RSCNTR_REQUIRE_RDMA65").is_none(),
            "{path} missing (setup.sh installs libibverbs1)"
        );
        eprintln!("SKIP: {path} missing");
        return;
    }
    match load(path) {
        Err(LoadError::NoCounterApi(why)) => {
            assert!(
                why.contains("rdma-core < 65") && why.contains("missing 10 of 10"),
                "{why}"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn loading_rdma_core_65_without_a_device() {
    let path = rdma65();
    if !path.exists() {
        assert!(
            std::env::var_os("RSCNTR_REQUIRE_RDMA65").is_none(),
            "{} missing",
            path.display()
        );
        eprintln!("SKIP: {} missing", path.display());
        return;
    }
    let api = load(path.to_str().unwrap()).expect("rdma-core 65 has the counter API");
    // No RDMA subsystem here: no device, and that is a clean error, not a crash.
    let e = Device::open(api, None).unwrap_err();
    assert!(
        e.contains("ibv_get_device_list") || e.contains("no RDMA device"),
        "{e}"
    );
}
