/* The rejection sampler keeps the target distribution.  With one draft and
 * identical rows: over many draws with drafts drawn from q, the first
 * emitted token is distributed as p (the target after temperature/top-k/
 * top-p), for good, bad and point-mass drafts; greedy acceptance is the
 * argmax rule.  With chains of k = 1..4 drafts (below): every emitted
 * position, the bonus token, the whole output and the accepted count follow
 * laws derived by hand from the logits (oracle.h).  Chi-square with fixed
 * seeds. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plume/sampler.h"

#include "oracle.h"

#define NV 6
#define DRAWS 60000

static const double target_p[NV] = {0.35, 0.25, 0.15, 0.12, 0.08, 0.05};

static plume_sampler *make(float temp, int top_k, float top_p, uint64_t seed)
{
    plume_sampling_params p = plume_sampling_defaults();
    p.temperature = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = 0.0f;
    p.repetition_penalty = 1.0f;
    p.seed = seed;
    plume_sampler *s;
    plume_error err = {0};
    assert_int_equal(plume_sampler_create(&p, NV, &s, &err), 0);
    return s;
}

static int32_t draw_from(plume_rng *r, const float *q)
{
    double u = plume_rng_uniform(r), c = 0;
    int32_t last = 0;
    for (int32_t i = 0; i < NV; i++) {
        if (q[i] <= 0)
            continue;
        c += q[i];
        last = i;
        if (u < c)
            return i;
    }
    return last;
}

/* q == NULL: point mass on token `point`. Checks the first emitted token. */
static void check_case(float temp, int top_k, float top_p, const float *q, int32_t point)
{
    float logits[2 * NV]; /* two rows: one draft */
    for (int i = 0; i < NV; i++)
        logits[i] = logits[NV + i] = (float)log(target_p[i]);
    plume_sampler *s = make(temp, top_k, top_p, 99);
    float p[NV], work[2 * NV];
    plume_sampler_probs(s, logits, NULL, 0, p); /* the distribution to reproduce */
    plume_rng drng;
    plume_rng_seed(&drng, 7);
    int hist[NV] = {0};
    int accepted = 0;
    float qrows[2 * NV];
    for (int it = 0; it < DRAWS; it++) {
        int32_t d = q ? draw_from(&drng, q) : point;
        if (q)
            memcpy(qrows, q, sizeof(float) * NV);
        int32_t history[4] = {0}, out[2], n_acc;
        int32_t n = plume_sampler_verify(s, logits, &d, 1, q ? qrows : NULL, history, 0, out,
                                         &n_acc, work);
        assert_true(n == 1 + n_acc && (n_acc == 0 || n_acc == 1));
        assert_true(out[0] >= 0 && out[0] < NV);
        if (n_acc)
            assert_int_equal(out[0], d);
        hist[out[0]]++;
        accepted += n_acc;
    }
    double chi = 0;
    int dof = -1;
    for (int i = 0; i < NV; i++) {
        if (p[i] == 0.0f) {
            assert_int_equal(hist[i], 0); /* filtered tokens never come out */
            continue;
        }
        double e = p[i] * DRAWS;
        chi += (hist[i] - e) * (hist[i] - e) / e;
        dof++;
    }
    static const double crit[6] = {0, 10.83, 13.82, 16.27, 18.47, 20.52}; /* p = 0.001 */
    assert_true(dof >= 1 && dof <= 5);
    assert_true(chi < crit[dof]);
    /* acceptance rate = sum min(p, q): a sanity check on the accept rule */
    double expect = 0;
    for (int i = 0; i < NV; i++)
        expect += fmin(p[i], q ? q[i] : (i == point ? 1.0 : 0.0));
    assert_true(fabs((double)accepted / DRAWS - expect) < 0.01);
    plume_sampler_free(s);
}

static void test_good_draft(void **state)
{
    (void)state;
    const float q[NV] = {0.33f, 0.27f, 0.14f, 0.12f, 0.09f, 0.05f};
    check_case(1.0f, 0, 1.0f, q, 0);
}

static void test_bad_draft(void **state)
{
    (void)state;
    const float q[NV] = {0.02f, 0.03f, 0.05f, 0.1f, 0.3f, 0.5f};
    check_case(1.0f, 0, 1.0f, q, 0);
}

static void test_point_mass_drafts(void **state)
{
    (void)state;
    check_case(1.0f, 0, 1.0f, NULL, 0);  /* likely token */
    check_case(1.0f, 0, 1.0f, NULL, 5);  /* unlikely token */
}

static void test_with_filters(void **state)
{
    (void)state;
    const float q[NV] = {0.1f, 0.1f, 0.2f, 0.2f, 0.2f, 0.2f};
    check_case(0.8f, 4, 1.0f, q, 0);       /* top-k: tokens 4, 5 filtered */
    check_case(1.2f, 0, 0.7f, q, 0);       /* top-p */
    check_case(1.0f, 3, 0.9f, NULL, 4);    /* point mass on a filtered token: always rejected */
}

static void test_greedy_accepts_argmax_prefix(void **state)
{
    (void)state;
    /* three rows: argmaxes 2, 4, 1 */
    float logits[4 * NV] = {0};
    logits[0 * NV + 2] = 5;
    logits[1 * NV + 4] = 5;
    logits[2 * NV + 1] = 5;
    logits[3 * NV + 3] = 5;
    plume_sampler *s = make(0.0f, 0, 1.0f, 1);
    float work[2 * NV];
    int32_t hist[8] = {0}, out[4], n_acc;
    int32_t good[3] = {2, 4, 1};
    assert_int_equal(plume_sampler_verify(s, logits, good, 3, NULL, hist, 0, out, &n_acc, work), 4);
    assert_int_equal(n_acc, 3);
    assert_int_equal(out[3], 3); /* bonus = argmax of the last row */
    int32_t bad[3] = {2, 0, 1};
    assert_int_equal(plume_sampler_verify(s, logits, bad, 3, NULL, hist, 0, out, &n_acc, work), 2);
    assert_int_equal(n_acc, 1);
    assert_int_equal(out[1], 4); /* the target's own choice replaces the rejected draft */
    plume_sampler_free(s);
}

/* ---- chains of k = 1..4 drafts, checked against hand-derived distributions ----
 *
 * A small target and a deliberately different draft model over CV tokens:
 * the target's logits at position i depend on i and on the token before it
 * (so every row differs, and a row read at the wrong offset is caught), and
 * the penalty window makes them depend on the accepted drafts too.  The
 * drafts are sampled, one after another, from the draft model's q_i(. | the
 * drafts before), which is a full distribution with one token at zero (as a
 * draft model's own top-k would leave), and passed to the verifier as
 * draft_probs (or, in point-mass mode, only as token ids).
 *
 * The expected distributions are enumerated over every draft prefix in
 * double precision, with p_i from oracle_probs (written from the
 * definitions, not plume_sampler_probs).  With full q, position i after an
 * accepted prefix a emits
 *   draft x accepted:       min(p_i(x|a), q_i(x|a))
 *   rejected, then b drawn: max(0, p_i(b|a) - q_i(b|a))   (normalised residual
 *                           times the rejection probability 1 - sum min(p, q))
 *   bonus (i = k):          p_k(b|a)
 * and with a point mass on the drawn draft d: accept d with p(d), so
 *   accepted x: q(x) p(x);  rejected, then b: p(b) (1 - q(b)).
 * Three fits per case, each a chi-square at p-value > CHAIN_ALPHA:
 *   - the joint distribution of the whole output (accepted drafts + the
 *     one target token), which is one multinomial per trial;
 *   - at every position i = 0..k (k: the bonus token), the emitted token
 *     given the accepted prefix before it, against p_i(. | prefix): a sum of
 *     conditional multinomial fits over the prefixes;
 *   - the number of accepted drafts, whose law is P(accept draft i | a) =
 *     sum_x min(p_i(x|a), q_i(x|a)).
 * A case makes 2 + (k+1) fits; the 10 cases below make 2 + 3 + 4 + 5 + 6
 * twice, plus 2 x 6 = 52 fits, so with CHAIN_ALPHA = 1e-5 a correct
 * verifier fails with probability < 52e-5 = 5.2e-4 for a random seed (union
 * bound); the seeds are fixed, so the outcome is deterministic. */

#define CV 5
#define KMAX 4
#define CHAIN_TRIALS 100000
#define CHAIN_ALPHA 1e-5
#define NCELL (5 + 25 + 125 + 625 + 3125) /* outputs of length 1..KMAX+1 */

static const int32_t chain_hist[3] = {2, 4, 1};
static const int cell_off[KMAX + 2] = {0, 5, 30, 155, 780, 3905};

static float tgt_row[KMAX + 1][CV][CV]; /* [position][previous token][token] */
static float drf_q[KMAX][CV][CV];

static void chain_tables(void)
{
    for (int i = 0; i <= KMAX; i++)
        for (int prev = 0; prev < CV; prev++) {
            for (int v = 0; v < CV; v++)
                tgt_row[i][prev][v] =
                    (float)(1.6 * sin(1.3 * v + 2.1 * prev + 0.9 * i + 0.4) + 0.15 * v);
            if (i == KMAX)
                continue;
            double q[CV], z = 0;
            int low = 0;
            for (int v = 0; v < CV; v++) {
                q[v] = exp(1.2 * cos(0.8 * v - 1.7 * prev + 1.4 * i) - 0.1 * v);
                if (q[v] < q[low])
                    low = v;
            }
            q[low] = 0; /* the draft model's own top-(CV-1) */
            for (int v = 0; v < CV; v++)
                z += q[v];
            for (int v = 0; v < CV; v++)
                drf_q[i][prev][v] = (float)(q[v] / z);
        }
}

typedef struct chain_case {
    const char *name;
    plume_sampling_params sp;
    int k;
    int point_mass; /* the verifier gets no draft_probs */
    uint64_t seed;
} chain_case;

static int prefix_code(const int32_t *t, int n)
{
    int c = 0;
    for (int j = n - 1; j >= 0; j--)
        c = c * CV + t[j];
    return c;
}

static int cell_of(const int32_t *t, int len) /* an output of len tokens */
{
    return cell_off[len - 1] + prefix_code(t, len - 1) * CV + t[len - 1];
}

/* Fills the expected joint law of the output (by cell), the law of the
 * accepted count, and p_i(b | prefix) at every cell (position i = len-1). */
static void chain_expect(const chain_case *c, int i, int32_t *prefix, double prob, double *joint,
                         double *nacc, double *cond)
{
    int32_t hist[3 + KMAX];
    memcpy(hist, chain_hist, sizeof chain_hist);
    memcpy(hist + 3, prefix, sizeof(int32_t) * (size_t)i);
    int prev = i ? prefix[i - 1] : chain_hist[2];
    double p[CV], margin;
    oracle_probs(&c->sp, tgt_row[i][prev], CV, hist, 3 + (size_t)i, p, &margin);
    assert_true(margin > 1e-4); /* no token near a filter threshold: not fragile */
    for (int b = 0; b < CV; b++) {
        prefix[i] = b;
        cond[cell_of(prefix, i + 1)] = p[b];
    }
    if (i >= c->k || i >= KMAX) { /* every draft accepted: the bonus token */
        for (int b = 0; b < CV; b++) {
            prefix[i] = b;
            joint[cell_of(prefix, i + 1)] += prob * p[b];
        }
        nacc[i] += prob;
        return;
    }
    const float *q = drf_q[i][prev];
    for (int b = 0; b < CV; b++) {
        double rej = c->point_mass ? p[b] * (1 - q[b]) : fmax(0.0, p[b] - q[b]);
        prefix[i] = b;
        joint[cell_of(prefix, i + 1)] += prob * rej;
        nacc[i] += prob * rej;
    }
    for (int a = 0; a < CV; a++) {
        double acc = c->point_mass ? q[a] * p[a] : fmin(p[a], q[a]);
        if (acc <= 0)
            continue;
        prefix[i] = a;
        chain_expect(c, i + 1, prefix, prob * acc, joint, nacc, cond);
    }
}

static int chain_failures; /* fits and impossible outcomes that failed in one case */

static void pearson(const double *e, const int *o, int n, double *chi, int *dof)
{
    oracle_pearson(e, o, n, chi, dof, &chain_failures);
}

/* Reports every fit that fails (all of a case's fits run before the case
 * fails, so the message says which position went wrong). */
static void check_fit(const chain_case *c, const char *what, double chi, int dof)
{
    double pv = dof > 0 ? oracle_chi2_sf(chi, dof) : 1.0;
    if (getenv("PLUME_TEST_VERBOSE") || !(pv > CHAIN_ALPHA))
        fprintf(stderr, "%s, k=%d: %s: chi2 %.1f with %d dof, p-value %.3g%s\n", c->name,
                c->k, what, chi, dof, pv, pv > CHAIN_ALPHA ? "" : "  FAILED");
    chain_failures += !(pv > CHAIN_ALPHA);
}

static void run_chain(const chain_case *c)
{
    chain_tables();
    static double joint_e[NCELL], cond[NCELL];
    static int joint_o[NCELL], pos_o[NCELL];
    double nacc_e[KMAX + 1] = {0};
    int nacc_o[KMAX + 1] = {0};
    memset(joint_e, 0, sizeof joint_e);
    memset(joint_o, 0, sizeof joint_o);
    memset(pos_o, 0, sizeof pos_o);
    int32_t prefix[KMAX + 1];
    chain_expect(c, 0, prefix, 1.0, joint_e, nacc_e, cond);
    chain_failures = 0;
    double total = 0, total_acc = 0;
    for (int j = 0; j < NCELL; j++)
        total += joint_e[j];
    for (int j = 0; j <= c->k; j++)
        total_acc += nacc_e[j];
    assert_true(fabs(total - 1) < 1e-6 && fabs(total_acc - 1) < 1e-6); /* laws that add up */

    plume_sampler *s;
    plume_error err = {0};
    assert_int_equal(plume_sampler_create(&c->sp, CV, &s, &err), 0);
    plume_rng drng; /* the draft model's own randomness */
    plume_rng_seed(&drng, c->seed ^ 0xd4af7ull);
    const int k = c->k;
    float logits[(KMAX + 1) * CV], qrows[KMAX * CV], work[2 * CV];
    for (int it = 0; it < CHAIN_TRIALS; it++) {
        int32_t d[KMAX], hist[3 + KMAX], out[KMAX + 1], n_acc = -1;
        memcpy(hist, chain_hist, sizeof chain_hist);
        for (int j = 3; j < 3 + KMAX; j++)
            hist[j] = -1;
        int prev = chain_hist[2];
        for (int i = 0; i < k; i++) {
            memcpy(logits + i * CV, tgt_row[i][prev], sizeof(float) * CV);
            memcpy(qrows + i * CV, drf_q[i][prev], sizeof(float) * CV);
            double u = plume_rng_uniform(&drng), cum = 0;
            d[i] = -1;
            for (int v = 0; v < CV && d[i] < 0; v++) {
                cum += drf_q[i][prev][v];
                if (u < cum)
                    d[i] = v;
            }
            if (d[i] < 0) /* u beyond the float total: the last possible token */
                for (int v = CV - 1; v >= 0 && d[i] < 0; v--)
                    if (drf_q[i][prev][v] > 0)
                        d[i] = v;
            prev = d[i];
        }
        memcpy(logits + k * CV, tgt_row[k][prev], sizeof(float) * CV);
        int32_t n = plume_sampler_verify(s, logits, d, k, c->point_mass ? NULL : qrows, hist, 3,
                                         out, &n_acc, work);
        assert_true(n_acc >= 0 && n_acc <= k && n == n_acc + 1);
        for (int j = 0; j < n; j++) {
            assert_true(out[j] >= 0 && out[j] < CV);
            if (j < n_acc) {
                assert_int_equal(out[j], d[j]); /* accepted drafts come out unchanged */
                assert_int_equal(hist[3 + j], d[j]);
            }
            pos_o[cell_of(out, j + 1)]++;
        }
        joint_o[cell_of(out, n)]++;
        nacc_o[n_acc]++;
    }
    plume_sampler_free(s);

    double chi = 0;
    int dof = 0;
    for (int j = 0; j < NCELL; j++)
        joint_e[j] *= CHAIN_TRIALS;
    pearson(joint_e, joint_o, cell_off[k + 1], &chi, &dof);
    check_fit(c, "joint law of the output", chi, dof);

    double ne[KMAX + 1];
    for (int j = 0; j <= k; j++)
        ne[j] = nacc_e[j] * CHAIN_TRIALS;
    chi = 0;
    dof = 0;
    pearson(ne, nacc_o, k + 1, &chi, &dof);
    check_fit(c, "number of accepted drafts", chi, dof);

    /* position i given its prefix: p_i(. | prefix) */
    for (int i = 0; i <= k; i++) {
        chi = 0;
        dof = 0;
        for (int a = 0; a < cell_off[i + 1] - cell_off[i]; a += CV) {
            const int base = cell_off[i] + a;
            int n_a = 0;
            for (int b = 0; b < CV; b++)
                n_a += pos_o[base + b];
            if (n_a == 0)
                continue;
            double e[CV];
            for (int b = 0; b < CV; b++)
                e[b] = n_a * cond[base + b];
            pearson(e, pos_o + base, CV, &chi, &dof);
        }
        char what[64];
        snprintf(what, sizeof what, "%s at position %d given its prefix",
                 i == k ? "bonus token" : "emitted token", i);
        check_fit(c, what, chi, dof);
    }
    assert_int_equal(chain_failures, 0);
}

static plume_sampling_params chain_params(float temp, int top_k, float top_p, float min_p,
                                          float pen, int last_n, uint64_t seed)
{
    plume_sampling_params p = plume_sampling_defaults();
    p.temperature = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.repetition_penalty = pen;
    p.repeat_last_n = last_n;
    p.seed = seed;
    return p;
}

static void test_chain_plain(void **state)
{
    (void)state;
    for (int k = 1; k <= KMAX; k++) {
        chain_case c = {"T=1, no filters", chain_params(1, 0, 1, 0, 1, -1, 100 + k), k, 0,
                        200 + k};
        run_chain(&c);
    }
}

/* temperature, top-k, top-p, min-p and a windowed repetition penalty (the
 * window covers the accepted drafts as the rows advance) shape the target in
 * verification exactly as in plain sampling */
static void test_chain_filtered(void **state)
{
    (void)state;
    for (int k = 1; k <= KMAX; k++) {
        chain_case c = {"T=0.7 top-k 4 top-p 0.9 min-p 0.05 penalty 1.3 over 3",
                        chain_params(0.7f, 4, 0.9f, 0.05f, 1.3f, 3, 300 + k), k, 0, 400 + k};
        run_chain(&c);
    }
}

/* drafts drawn from q but handed over as token ids: still the target's law */
static void test_chain_point_mass(void **state)
{
    (void)state;
    chain_case a = {"point mass, T=1", chain_params(1, 0, 1, 0, 1, -1, 501), 3, 1, 601};
    run_chain(&a);
    chain_case b = {"point mass, filtered", chain_params(0.7f, 4, 0.9f, 0.05f, 1.3f, 3, 502), 3,
                    1, 602};
    run_chain(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_draft),
        cmocka_unit_test(test_bad_draft),
        cmocka_unit_test(test_point_mass_drafts),
        cmocka_unit_test(test_with_filters),
        cmocka_unit_test(test_greedy_accepts_argmax_prefix),
        cmocka_unit_test(test_chain_plain),
        cmocka_unit_test(test_chain_filtered),
        cmocka_unit_test(test_chain_point_mass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
