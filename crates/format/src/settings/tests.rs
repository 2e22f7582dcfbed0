use super::*;

/// `settings` through the environment and back.
fn round_trip(settings: &Settings) -> Result<Settings, SettingsError> {
    let env = settings.to_env();
    Settings::from_env(|name| {
        env.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_str().unwrap().to_string())
    })
}

fn env_of<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
}

#[test]
fn settings_read_back() {
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let all = Settings {
        data: Some("/tmp/x/fntrace.data".into()),
        tracer: Tracer::Function,
        filter: strings(&["main", "work_*", "!a:mod:libm"]),
        notrace: strings(&["log"]),
        graph_functions: strings(&["g", "h"]),
        depth: Some(3),
        time_filter_ns: Some(1_500_000),
        triggers: strings(&["main@trace_on,depth=2", "f@trace_off"]),
        buffer_size: Some(512 << 10),
        flight: Some(4 << 20),
        lossy: true,
        ctl: Some("/run/user/1/fntrace/12.sock".into()),
        parent_session: Some("p12".into()),
        slow: true,
        libcall: Libcall::Nested,
        args: vec!["add@arg1/d32%rdi,retval/d32".into(), "f@fparg1/64%xmm0".into()],
        auto_args: true,
        no_follow: Some(4321),
        recorder: Some(4320),
    };
    assert_eq!(round_trip(&all), Ok(all.clone()));
    for libcall in Libcall::ALL {
        let s = Settings {
            libcall,
            ..Settings::default()
        };
        assert_eq!(round_trip(&s), Ok(s.clone()));
    }
    let bad = Settings::from_env(|name| (name == LIBCALL).then(|| "some".to_string()));
    assert_eq!(bad, Err(SettingsError::Libcall("some".into())));
    let bad = Settings::from_env(|name| (name == ARGS).then(|| "f@arg1;g@arg0".to_string()));
    let e = bad.unwrap_err().to_string();
    assert!(e.starts_with("bad argument spec 'g@arg0'"), "{e}");
    assert_eq!(round_trip(&Settings::default()), Ok(Settings::default()));
    for tracer in Tracer::ALL {
        let s = Settings {
            tracer,
            ..Settings::default()
        };
        assert_eq!(round_trip(&s), Ok(s.clone()));
    }
}

/// What `fntrace record` has always put in the environment.
#[test]
fn the_environment_is_as_before() {
    let s = Settings {
        data: Some("/d".into()),
        filter: vec!["main".into(), "work_*".into()],
        triggers: vec!["main@trace_on,depth=2".into(), "f@trace_off".into()],
        depth: Some(3),
        ..Settings::default()
    };
    let env: Vec<(&str, String)> = s
        .to_env()
        .into_iter()
        .map(|(k, v)| (k, v.into_string().unwrap()))
        .collect();
    let expected = [
        (DATA, "/d"),
        (TRACER, "function_graph"),
        (FILTER, "main,work_*"),
        (DEPTH, "3"),
        (TRIGGERS, "main@trace_on,depth=2;f@trace_off"),
    ];
    assert_eq!(env, expected.map(|(k, v)| (k, v.to_string())));
    assert!(env.iter().all(|(k, _)| OPTIONS.contains(k)));
}

#[test]
fn lists_split_as_users_write_them() {
    let s = Settings::from_env(env_of(&[
        (FILTER, " a,b  c,,"),
        (TRIGGERS, " a@trace_on ; ;b@depth=2,trace_off"),
    ]))
    .unwrap();
    assert_eq!(s.filter, ["a", "b", "c"]);
    assert_eq!(s.triggers, ["a@trace_on", "b@depth=2,trace_off"]);
    assert_eq!(patterns("").count(), 0);
}

#[test]
fn sizes_take_units() {
    let s = Settings::from_env(env_of(&[(BUFFER_SIZE, "64K"), (FLIGHT, "0")])).unwrap();
    assert_eq!(s.buffer_size, Some(64 << 10));
    // Raised to the minimum by the runtime.
    assert_eq!(s.flight, Some(0));
}

#[test]
fn bad_values_are_errors() {
    let error = |vars: &[(&str, &str)]| Settings::from_env(env_of(vars)).unwrap_err().to_string();
    assert_eq!(error(&[(TRACER, "nope")]), "unknown tracer 'nope'");
    assert_eq!(error(&[(DEPTH, "x")]), "bad FNTRACE_DEPTH");
    assert_eq!(error(&[(DEPTH, "4294967296")]), "bad FNTRACE_DEPTH");
    assert_eq!(error(&[(TIME_FILTER, "-1")]), "bad FNTRACE_TIME_FILTER");
    assert_eq!(
        error(&[(BUFFER_SIZE, "17179869184G")]),
        "FNTRACE_BUFFER_SIZE=17179869184G: bad size '17179869184G' (expected e.g. 65536, 512K, 4M)"
    );
    assert!(error(&[(BUFFER_SIZE, "99999999999999999999")])
        .starts_with("FNTRACE_BUFFER_SIZE=99999999999999999999: bad size"));
    assert!(error(&[(FLIGHT, "18446744073709551615")])
        .starts_with("FNTRACE_FLIGHT=18446744073709551615: 16 EiB is more than"));
    assert!(error(&[(FLIGHT, "4T")]).contains("unit 'T'"));
}

#[test]
fn separators_are_what_lists_split_on() {
    for c in [',', ';', ' ', '\t'] {
        assert!(separates(c), "{c:?}");
    }
    assert!(!separates('*') && !separates('!') && !separates(':'));
    for pattern in ["a*", "!b:mod:libm", "f?"] {
        assert!(!pattern.contains(separates));
        assert_eq!(patterns(pattern).collect::<Vec<_>>(), [pattern]);
    }
}
