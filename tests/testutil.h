/* testutil.h: the common main() of every Check test program.
 *
 * Each test file defines `static Suite *make_suite(void)` and then says
 * SBX_TEST_MAIN(make_suite). Tests run in fork mode (each in its own process) with the
 * timeout Check is given per test case; the program exits non-zero on any failure. */
#ifndef SBX_TESTUTIL_H
#define SBX_TESTUTIL_H

#include <check.h>
#include <stdlib.h>

#define SBX_TEST_MAIN(make)                                                                \
        int main(void) {                                                                   \
                SRunner *sr = srunner_create(make());                                      \
                int nf;                                                                    \
                srunner_run_all(sr, CK_NORMAL);                                            \
                nf = srunner_ntests_failed(sr);                                            \
                srunner_free(sr);                                                          \
                return nf == 0 ? EXIT_SUCCESS : EXIT_FAILURE;                              \
        }

#endif
