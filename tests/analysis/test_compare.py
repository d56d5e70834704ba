"""compare against oracles we did not write: the ratio of two independent betas by quadrature (scipy), a
Gaussian copula's rank correlation (Kruskal 1958) and its ratio by NumPy sampling; identical priors on common
random numbers; the notes, --posterior, and the report files.

Statistical checks allow K = 4 Monte Carlo standard errors (6e-5 false-failure rate per comparison, normal
approximation) plus two histogram bins where a quantile is read off the histogram, with fixed seeds.
"""

import json
import math

import numpy as np
import pytest
from scipy import integrate, optimize, stats

import mcflops
from mcflops.analysis import compare as compare_mod
from mcflops.errors import SpecError, UsageError
from mcflops.spec import resolved_dict

K = 4.0
N = 1 << 18
PEAK = 989.4e12  # H100 SXM dense BF16 (the catalogue)

A = {"name": "h100", "seed": 11, "samples": N, "hardware": {"accelerator": "h100-sxm", "count": 4096},
     "priors": {"params": 70e9, "tokens": {"lognormal": [1e12, 2e12]}, "mfu": {"beta": [0.25, 0.40]}}}
B = {**A, "name": "h200", "hardware": {"accelerator": "h200", "count": 4096},
     "priors": {**A["priors"], "mfu": {"beta": [0.28, 0.44]}}}


def _betas():
    sa, sb = mcflops.load_spec(A), mcflops.load_spec(B)
    xa, xb = (stats.beta(s.priors["mfu"].params["a"], s.priors["mfu"].params["b"]) for s in (sa, sb))
    # the fitted betas are the files' priors: their 5% and 95% quantiles are the intervals written
    assert xa.ppf([0.05, 0.95]) == pytest.approx([0.25, 0.40], abs=1e-3)
    assert xb.ppf([0.05, 0.95]) == pytest.approx([0.28, 0.44], abs=1e-3)
    return sa, sb, xa, xb


@pytest.fixture(scope="module")
def independent():
    sa, sb, xa, xb = _betas()
    return compare_mod.compare(sa, sb), xa, xb


def test_independent_ratio_is_the_ratio_of_independent_betas(independent):
    """Same peak and tokens (shared, they cancel): B/A = mfu_A / mfu_B with the two MFUs independent, whose
    CDF is P(X <= r Y) = int F_X(r y) f_Y(y) dy (quadrature, not sampling)."""
    c, xa, xb = independent
    assert c["inputs"][2] == {"name": "mfu", "a": c["inputs"][2]["a"], "b": c["inputs"][2]["b"],
                              "draws": "independent", "spearman": 0.0}
    assert c["shared_inputs"] == ["tokens"] and c["independent_inputs"] == ["mfu"] and c["coupled_inputs"] == {}

    def cdf(r):
        return integrate.quad(lambda y: xa.cdf(min(r * y, 1.0)) * xb.pdf(y), 0, 1, points=[0.3, 0.4], limit=200)[0]

    def pdf(r):
        return integrate.quad(lambda y: y * xa.pdf(min(r * y, 1.0)) * xb.pdf(y), 0, 1, points=[0.3, 0.4],
                              limit=200)[0]

    log_bin = np.diff(c["ratio_hist"]["log_edges"])[0] / 64  # the fine histogram's bin, in log B/A
    for p, k in zip((0.05, 0.25, 0.5, 0.75, 0.95), ("p5", "p25", "p50", "p75", "p95")):
        q = optimize.brentq(lambda r: cdf(r) - p, 0.2, 5.0, xtol=1e-12)
        se_log = math.sqrt(p * (1 - p) / N) / (q * pdf(q))  # MCSE of the log quantile: density of log R = r f(r)
        assert abs(math.log(c["ratio"][k]) - math.log(q)) < K * se_log + 2 * log_bin, k
    P = cdf(1.0)  # P(B < A) = P(mfu_A < mfu_B)
    assert P == pytest.approx(0.70, abs=0.01)  # the figure quoted for these priors
    assert abs(c["ratio"]["prob_b_less"] - P) < K * math.sqrt(P * (1 - P) / N)
    assert c["ratio"]["prob_b_less"] + c["ratio"]["prob_b_greater"] == pytest.approx(1.0)


def test_notes_name_the_shared_peak_and_the_independent_input(independent):
    notes = " ".join(independent[0]["notes"])
    assert "same catalogue dense peak" in notes and "h200" in notes and "MFU" in notes
    assert "drawn independently" in notes and "--couple mfu=" in notes
    assert "observe" not in notes


def _spearman_se(rho_s, n):
    """SE of Spearman's r_s: var(atanh r_s) = 1.06 / (n - 3) (Fieller, Hartley & Pearson 1957), by the delta method."""
    return (1 - rho_s**2) * math.sqrt(1.06 / (n - 3))


@pytest.mark.parametrize("rho_s", [0.7, -0.4, 0.0])
def test_coupled_draws_have_the_requested_rank_correlation(rho_s):
    sa, sb, xa, xb = _betas()
    n = 1 << 17
    da, db = compare_mod.paired_draws(sa, sb, {"mfu": rho_s}, size=n)
    r = stats.spearmanr(da["mfu"], db["mfu"]).statistic
    assert abs(r - rho_s) < K * _spearman_se(rho_s, n)
    # the marginals stay the files' priors (medians within 4 MCSE of the beta's median)
    for d, x in ((da, xa), (db, xb)):
        se = math.sqrt(0.25 / n) / x.pdf(x.median())
        assert abs(np.median(d["mfu"]) - x.median()) < K * se
    assert np.array_equal(da["tokens"], db["tokens"])  # the shared input: the same draws


def test_coupled_ratio_matches_a_numpy_gaussian_copula():
    """Quantiles of B/A with rank correlation 0.7 against NumPy: normal scores with correlation
    rho = 2 sin(pi 0.7 / 6) (Kruskal 1958), each turned into its beta by rank (the k-th smallest score gets
    the k-th smallest of NumPy's own beta draws: the empirical quantile transform), 2M oracle draws."""
    sa, sb, xa, xb = _betas()
    c = compare_mod.compare(sa, sb, couple=["mfu=0.7"])
    assert c["coupled_inputs"] == {"mfu": 0.7} and c["inputs"][2]["draws"] == "coupled"
    rho = 2 * math.sin(math.pi * 0.7 / 6)
    rng = np.random.default_rng(3)
    m = 2_000_000
    za = rng.standard_normal(m)
    zb = rho * za + math.sqrt(1 - rho**2) * rng.standard_normal(m)

    def by_rank(z, x):
        out = np.empty(m)
        out[np.argsort(z)] = np.sort(rng.beta(x.args[0], x.args[1], m))
        return out

    lr = np.log(by_rank(za, xa) / by_rank(zb, xb))
    log_bin = np.diff(c["ratio_hist"]["log_edges"])[0] / 64
    for p, k in zip((0.05, 0.5, 0.95), ("p5", "p50", "p95")):
        q = np.quantile(lr, p)
        f = stats.gaussian_kde(lr[:20000])(q)[0]  # density of log B/A at the quantile, for the MCSE
        se = math.sqrt(p * (1 - p)) / f * math.hypot(1 / math.sqrt(N), 1 / math.sqrt(m))
        assert abs(math.log(c["ratio"][k]) - q) < K * se + 2 * log_bin, k
    P = float(np.mean(lr < 0))
    assert abs(c["ratio"]["prob_b_less"] - P) < K * math.sqrt(P * (1 - P)) * math.hypot(1 / math.sqrt(N), 1 / math.sqrt(m))


def test_identical_priors_share_draws_whatever_their_source_says():
    """Only the accelerator differs (same peak), mfu's source text too: every input is shared, B/A = 1 exactly."""
    a = {**A, "priors": {**A["priors"], "mfu": {"beta": [0.25, 0.40], "source": "one paper"}}}
    b = {**a, "hardware": B["hardware"], "priors": {**a["priors"], "mfu": {"beta": [0.25, 0.40], "source": "another"}}}
    c = compare_mod.compare(mcflops.load_spec(a), mcflops.load_spec(b), samples=50_000)
    assert c["ratio"]["min"] == c["ratio"]["max"] == 1.0
    assert c["shared_inputs"] == ["tokens", "mfu"] and c["independent_inputs"] == []
    assert any("nothing else differs" in n for n in c["notes"])


def test_one_mfu_prior_on_two_accelerators_is_named_with_the_peak_ratio_it_makes_certain():
    """H100 against B200 with one MFU prior: every draw's B / A is the catalogue's peak ratio (the datasheets'
    dense BF16 figures, mcflops/data/accelerators.yaml), and the note says so and points to a ratio prior."""
    from mcflops import hardware

    b = {**A, "name": "b200", "hardware": {"accelerator": "b200", "count": 4096}}
    c = compare_mod.compare(mcflops.load_spec(A), mcflops.load_spec(b), samples=20_000)
    peak_ratio = hardware.get("h100-sxm").peak("bf16") / hardware.get("b200").peak("bf16")
    assert c["ratio"]["min"] == pytest.approx(peak_ratio, rel=1e-6) == c["ratio"]["max"]
    (n,) = [x for x in c["notes"] if x.startswith("mfu: one prior for")]
    assert "h100-sxm and b200" in n and "relative_to" in n and "--couple mfu=RHO" in n
    # its own prior for B: drawn independently, and the note is the independent one's instead
    c2 = compare_mod.compare(mcflops.load_spec(A), mcflops.load_spec({**B, "hardware": b["hardware"]}), samples=20_000)
    assert not [x for x in c2["notes"] if x.startswith("mfu: one prior for")]


# moved from test_plan.py, with its spec
SPEC = {
    "name": "plan", "seed": 5, "samples": 200_000, "hardware": {"accelerator": "h100-sxm", "count": 4096},
    "priors": {"params": 70e9, "tokens": {"lognormal": [1e12, 2e12]}, "mfu": 0.4,
               "peak_flops": {"lognormal": [800e12, 1000e12]}, "price": {"lognormal": [2.0, 4.0]}},
}


def test_compare_identical_files_ratio_exactly_one(tmp_path):
    spec = mcflops.load_spec(SPEC)
    c = compare_mod.compare(spec, spec, samples=50_000)
    for k in ("p5", "p25", "p50", "p75", "p95", "min", "max"):
        assert c["ratio"][k] == 1.0
    assert c["ratio"]["prob_b_greater"] == 0.0 and c["ratio"]["prob_b_less"] == 0.0
    assert c["a"] == {**c["b"], "path": c["a"]["path"]}
    assert all(r["draws"] in ("shared", "fixed") for r in c["inputs"])


def test_compare_uses_common_random_numbers():
    """Same priors, other accelerator: every draw's ratio is the peak ratio (the same z for every shared input)."""
    a = {**SPEC, "priors": {k: v for k, v in SPEC["priors"].items() if k != "peak_flops"}}
    b = {**a, "hardware": {"accelerator": "a100-sxm", "count": 4096}}
    from mcflops import hardware

    want = PEAK / hardware.get("a100-sxm").peak("bf16")
    c = compare_mod.compare(mcflops.load_spec(a), mcflops.load_spec(b), samples=50_000)
    for k in ("min", "p50", "max"):
        assert c["ratio"][k] == pytest.approx(want, rel=1e-5)
    assert c["ratio"]["prob_b_greater"] == 1.0
    # a wider MFU prior in B: the ratio now varies, but tokens (shared, same z) cancel exactly
    b2 = {**a, "priors": {**a["priors"], "mfu": {"beta": [0.3, 0.5]}}}
    c2 = compare_mod.compare(mcflops.load_spec(a), mcflops.load_spec(b2), samples=50_000)
    assert c2["ratio"]["min"] < 1 < c2["ratio"]["max"]
    assert c2["shared_inputs"] == ["tokens", "price"]
    assert c2["independent_inputs"] == ["mfu"]  # a point value in A, uncertain in B: nothing to share


OBS = {"gpu_hours": {"value": 5e5, "sigma": 0.05}}


def test_posterior_weights_both_files_by_their_observations():
    """A observes GPU-hours, B is A on an A100 (no observation): with --posterior A's side is the run's
    posterior (same draws and weights, other bins) and B's is A's times the peak ratio (every input shared)."""
    from mcflops import hardware

    a = {**A, "samples": 200_000, "observe": OBS}
    b = {**a, "hardware": {"accelerator": "a100-sxm", "count": 4096}}
    b.pop("observe")
    sa, sb = mcflops.load_spec(a), mcflops.load_spec(b)
    prior = compare_mod.compare(sa, sb)
    assert any("observe:" in n and "--posterior" in n for n in prior["notes"])
    c = compare_mod.compare(sa, sb, posterior=True)
    assert c["distribution"] == "posterior" and c["observed"] == {"a": ["gpu_hours"]}
    assert not any("observe:" in n for n in c["notes"])
    res = mcflops.run(a)
    assert c["a"]["p50"] == pytest.approx(res.posterior["gpu_hours"]["p50"], rel=2e-3)
    assert c["ess"] == pytest.approx(res.posterior["ess"], rel=1e-3)
    want = PEAK / hardware.get("a100-sxm").peak("bf16")
    assert c["ratio"]["min"] == pytest.approx(want, rel=1e-5) and c["ratio"]["max"] == pytest.approx(want, rel=1e-5)
    assert c["b"]["p50"] == pytest.approx(c["a"]["p50"] * want, rel=2e-3)
    assert abs(math.log(c["a"]["p50"] / 5e5)) < abs(math.log(prior["a"]["p50"] / 5e5))  # pulled to the figure
    with pytest.raises(UsageError, match="observe") as e:
        compare_mod.compare(sb, sb, posterior=True)
    assert (e.value.arg, e.value.flag, e.value.path) == ("posterior", "--posterior", sb.path)


@pytest.mark.parametrize("couple, words", [
    (["mfu=2"], "between -1 and 1"), (["mfu"], "INPUT=RHO"), (["params=0.5"], "point value"),
    (["flux=0.5"], "not an input"), ({"mfu": 0.5, "tokens": "x"}, "between -1 and 1"),
])
def test_bad_couplings(couple, words):
    sa, sb = mcflops.load_spec(A), mcflops.load_spec(B)
    with pytest.raises(UsageError, match=words) as e:
        compare_mod.compare(sa, sb, couple=couple, samples=2000)
    assert (e.value.arg, e.value.flag) == ("couple", "--couple")


def _cli(args, capsys):
    from mcflops.cli.main import main

    code = main(args)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_cli_out_writes_the_comparison_report(tmp_path, capsys):
    fa, fb = tmp_path / "a.yaml", tmp_path / "b.yaml"
    fa.write_text(json.dumps({**A, "samples": 20_000, "observe": OBS}))
    fb.write_text(json.dumps({**B, "samples": 20_000}))
    out = tmp_path / "cmp"
    code, stdout, _ = _cli(["compare", str(fa), str(fb), "--couple", "mfu=0.5", "--out", str(out), "--json",
                            "--quiet"], capsys)
    assert code == 0
    d = json.loads(stdout)
    assert d["coupled_inputs"] == {"mfu": 0.5} and d["out"] == str(out)
    assert {p.name for p in out.iterdir()} >= {"compare.json", "report.md", "report.html"}
    saved = json.loads((out / "compare.json").read_text())
    assert saved["ratio"] == d["ratio"] and saved["inputs"] == d["inputs"]
    md, html = (out / "report.md").read_text(), (out / "report.html").read_text()
    p50 = f"{d['ratio']['p50']:.3g}"
    for text in (md, html):
        assert f"median ×{p50}" in text and "coupled" in text and "rank correlation 0.5" in text
        assert "same catalogue dense peak" in text and "--posterior compares" in text
        assert "--couple mfu=0.5" in text  # the command that repeats it
    assert "| B / A |" in md
    if (out / "compare.png").exists():
        assert "data:image/png;base64," in html
    # the terminal lists the draws and the notes
    code, stdout, _ = _cli(["compare", str(fa), str(fb), "--quiet"], capsys)
    assert code == 0 and "independent mfu" in stdout and "shared tokens" in stdout and "observe:" in stdout
    code, _, err = _cli(["compare", str(fa), str(fb), "--couple", "mfu=1.5", "--quiet"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--couple" in err
    code, _, err = _cli(["compare", str(fb), str(fb), "--posterior", "--quiet"], capsys)
    assert code == 2 and "--posterior" in err


def test_a_compare_block_in_b_couples_and_the_command_line_overrides_it(tmp_path):
    sa, sb = mcflops.load_spec(A), mcflops.load_spec({**B, "compare": {"couple": {"mfu": 0.7}}})
    rows = compare_mod.coupling(sa, sb)
    assert rows[2]["draws"] == "coupled" and rows[2]["spearman"] == 0.7 and rows[2]["by"] == "compare:"
    rows = compare_mod.coupling(sa, sb, ["mfu=-0.2"])
    assert rows[2]["spearman"] == -0.2 and rows[2]["by"] == "--couple"
    da, db = compare_mod.paired_draws(sa, sb, size=1 << 15)
    assert abs(stats.spearmanr(da["mfu"], db["mfu"]).statistic - 0.7) < K * _spearman_se(0.7, 1 << 15)
    # the block is part of the resolved file (and its hash)
    assert resolved_dict(sb)["compare"] == {"couple": {"mfu": 0.7}}
    from mcflops.spec.schema import json_schema

    assert "couple" in json_schema()["properties"]["compare"]["properties"]
    # checked at load against B, and against A when the files meet, naming B's line
    f = tmp_path / "b.yaml"
    f.write_text("name: b\nhardware: {accelerator: h200}\npriors:\n  params: 7e9\n  tokens: 1T\n"
                 "  mfu: {beta: [0.3, 0.4]}\n  goodput: {beta: [0.8, 0.9]}\ncompare:\n  couple: {mfu: 1.5}\n")
    with pytest.raises(SpecError, match="between -1 and 1") as e:
        mcflops.load_spec(f)
    assert e.value.field == "compare.couple.mfu" and e.value.line == 9
    f.write_text(f.read_text().replace("mfu: 1.5", "goodput: 0.5"))
    with pytest.raises(SpecError, match="point value in A") as e:
        compare_mod.coupling(sa, mcflops.load_spec(f))
    assert (e.value.field, e.value.line, e.value.path) == ("compare.couple.goodput", 9, str(f))
