/* Unit tests for src/iso/tmpl_recipe.c's parser: the parent's own check of
 * the recipe the front end canonicalized (a front end is not trusted to
 * have checked it), build commands included.
 */
#include "iso/tmpl.h"

#include "tap.h"

static int
parse (const char *text)
{
  char release[72], include[8192];
  return sbx_tmpl_recipe_parse (text, release, sizeof release, include, sizeof include);
}

static int
test_plain (void)
{
  char release[72], include[8192];
  CHECK (sbx_tmpl_recipe_parse ("release bookworm\npackage jq\npackage python3\n", release,
                                sizeof release, include, sizeof include)
         == 0);
  CHECK (strcmp (release, "bookworm") == 0);
  CHECK (strcmp (include, "jq,python3") == 0);
  CHECK (parse ("package jq\n") < 0);          /* no release */
  CHECK (parse ("release ../x\n") < 0);
  CHECK (parse ("release bookworm") < 0);      /* no final newline */
  CHECK (parse ("release bookworm\nfoo x\n") < 0);
  return 0;
}

static int
test_run (void)
{
  char big[1100], text[1300];
  int i, n;

  CHECK (parse ("release bookworm\nrun echo hi > /etc/motd\nrun apt-get install -y jq\n") == 0);
  CHECK (parse ("release bookworm\npackage jq\nrun a\tb\n") == 0);
  CHECK (parse ("release bookworm\nrun \n") < 0);                 /* empty */
  CHECK (parse ("release bookworm\nrun a\rb\n") < 0);             /* control byte */
  CHECK (parse ("release bookworm\nrun caf\xc3\xa9\n") < 0);      /* not ASCII */
  CHECK (parse ("run true\nrelease bookworm\n") < 0);             /* before the release */
  CHECK (parse ("release bookworm\nrun true\npackage jq\n") < 0); /* commands come last */
  /* 1000 bytes: fine; 1001: not */
  memset (big, 'x', sizeof big);
  big[SBX_TMPL_RUN_LEN] = '\0';
  snprintf (text, sizeof text, "release bookworm\nrun %s\n", big);
  CHECK (parse (text) == 0);
  big[SBX_TMPL_RUN_LEN] = 'x';
  big[SBX_TMPL_RUN_LEN + 1] = '\0';
  snprintf (text, sizeof text, "release bookworm\nrun %s\n", big);
  CHECK (parse (text) < 0);
  /* 32 commands: fine; 33: not */
  for (int k = SBX_TMPL_RUN_MAX; k <= SBX_TMPL_RUN_MAX + 1; k++)
    {
      char many[2048];
      n = snprintf (many, sizeof many, "release bookworm\n");
      for (i = 0; i < k; i++)
        n += snprintf (many + n, sizeof many - (size_t) n, "run true\n");
      CHECK (parse (many) == (k == SBX_TMPL_RUN_MAX ? 0 : -1));
    }
  return 0;
}

int
main (void)
{
  RUN (test_plain);
  RUN (test_run);
  return tap_done ();
}
