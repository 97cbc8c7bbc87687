/* sbx CLI: the manual page (`sbx help --man`, roff) and the shell
 * completions (`sbx completion bash|zsh`), both made from the help texts
 * (help.c), so that neither can drift from `sbx help`: the commands are
 * the texts' names, their subcommands the words after `sbx NAME` in
 * their usage lines, their options every -x and --word the text shows,
 * and a command takes sandbox IDs when its usage names an ID. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "util/buf.h"

/* Text as roff shows it verbatim inside .nf: backslashes escaped, a line
   starting with . or ' kept from being a request. */
static void
roff_verbatim (const char *text)
{
  int bol = 1;

  for (const char *p = text; *p; p++)
    {
      if (bol && (*p == '.' || *p == '\''))
        fputs ("\\&", stdout);
      if (*p == '\\')
        fputs ("\\e", stdout);
      else if (*p == '-')
        fputs ("\\-", stdout);
      else
        fputc (*p, stdout);
      bol = *p == '\n';
    }
  if (!bol)
    fputc ('\n', stdout);
}

int
sbx_cli_print_manual (void)
{
  size_t i;

  printf (".TH SBX 1 \"\" \"sbx %s\" \"User Commands\"\n", SBX_VERSION);
  puts (".SH NAME\nsbx \\- run untrusted code in isolated sandboxes");
  puts (".SH SYNOPSIS\n.B sbx\n.I COMMAND\n.RI [ ARGS ...]");
  puts (".SH DESCRIPTION\n.nf");
  roff_verbatim (sbx_cli_main_help);
  puts (".fi\n.SH COMMANDS");
  for (i = 0; i < sbx_cli_help_count (); i++)
    {
      printf (".SS sbx %s\n.nf\n", sbx_cli_help_name (i));
      roff_verbatim (sbx_cli_help_text (i));
      puts (".fi");
    }
  puts (".SH SEE ALSO\n"
        "The sbx daemon: \\fBsbx serve \\-\\-help\\fR. The HTTP API, the E2B\n"
        "compatibility and the isolation model: docs/ in the sbx sources.");
  return fflush (stdout) == 0 ? 0 : SBX_EXIT_FAILURE;
}

/* Append WORD to the space-separated list in b unless it is there. */
static void
add_word (struct sbx_buf *b, const char *w, size_t n)
{
  const char *p = b->data;

  while (p != NULL && *p)
    {
      size_t k = strcspn (p, " ");
      if (k == n && strncmp (p, w, n) == 0)
        return;
      p += k + (p[k] == ' ');
    }
  if (b->len)
    sbx_buf_append (b, " ", 1);
  sbx_buf_append (b, w, n);
}

/* The options a help text shows: -x where a short option stands (after a
   space, '[' or '|', before ',', ' ', ']' or '|'), and every --word. */
static void
options_of (const char *text, struct sbx_buf *out)
{
  for (const char *p = text; *p; p++)
    {
      size_t n;
      if (*p != '-' || (p > text && !strchr (" [|\n", p[-1])))
        continue;
      if (p[1] == '-' && islower ((unsigned char) p[2]))
        {
          for (n = 2; islower ((unsigned char) p[n]) || isdigit ((unsigned char) p[n]) || p[n] == '-'; n++)
            ;
          add_word (out, p, n);
          p += n - 1;
        }
      else if (isalpha ((unsigned char) p[1]) && p[2] != '\0' && strchr (", ]|", p[2]))
        add_word (out, p, 2);
    }
}

/* Subcommands: in lines "usage: sbx NAME SUB ..." and "       sbx NAME SUB",
   SUB when it is a lowercase word (not ID, [OPTIONS] or --x). */
static void
subcommands_of (const char *name, const char *text, struct sbx_buf *out)
{
  char lead[64];
  size_t ln = (size_t) snprintf (lead, sizeof lead, "sbx %s ", name);

  for (const char *p = strstr (text, lead); p; p = strstr (p + 1, lead))
    {
      const char *w = p + ln;
      size_t n = 0;
      while (islower ((unsigned char) w[n]))
        n++;
      if (n > 0 && (w[n] == ' ' || w[n] == '\n'))
        add_word (out, w, n);
    }
}

static int
takes_ids (const char *text)
{
  const char *nl = strchr (text, '\n');
  const char *id = strstr (text, " ID");

  return id != NULL && (nl == NULL || id < nl || strstr (text, "       sbx") != NULL);
}

int
sbx_cli_print_completion (const char *shell)
{
  struct sbx_buf cmds = SBX_BUF_INIT;
  size_t i;

  if (strcmp (shell, "zsh") == 0)
    puts ("#compdef sbx\nautoload -U +X bashcompinit && bashcompinit");
  else if (strcmp (shell, "bash") != 0)
    {
      sbx_cli_usage ("completion: bash or zsh, not `%s`", shell);
      return SBX_EXIT_USAGE;
    }
  for (i = 0; i < sbx_cli_help_count (); i++)
    add_word (&cmds, sbx_cli_help_name (i), strlen (sbx_cli_help_name (i)));
  add_word (&cmds, "help", 4);
  add_word (&cmds, "version", 7);
  add_word (&cmds, "completion", 10);
  puts ("# sbx completion (made by `sbx completion` from `sbx help`)");
  puts ("_sbx() {\n"
        "  local cur=${COMP_WORDS[COMP_CWORD]} cmd=${COMP_WORDS[1]} words= ids=0");
  printf ("  if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
          "    COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")); return\n  fi\n",
          cmds.data);
  puts ("  case \"$cmd\" in");
  for (i = 0; i < sbx_cli_help_count (); i++)
    {
      struct sbx_buf words = SBX_BUF_INIT;
      const char *text = sbx_cli_help_text (i);
      subcommands_of (sbx_cli_help_name (i), text, &words);
      options_of (text, &words);
      printf ("    %s) words=\"%s\" ids=%d ;;\n", sbx_cli_help_name (i),
              words.data ? words.data : "", takes_ids (text));
      sbx_buf_free (&words);
    }
  printf ("    help) words=\"%s\" ;;\n", cmds.data);
  puts ("    completion) words=\"bash zsh\" ;;\n"
        "  esac\n"
        "  if [ \"$ids\" = 1 ] && [[ \"$cur\" != -* ]]; then\n"
        "    words=\"$words $(sbx ls -q 2>/dev/null)\"\n"
        "  fi\n"
        "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
        "}\n"
        "complete -o default -F _sbx sbx");
  sbx_buf_free (&cmds);
  return fflush (stdout) == 0 ? 0 : SBX_EXIT_FAILURE;
}

int
sbx_cmd_completion (int argc, char **argv)
{
  if (argc == 2 && sbx_cli_is_help (argv[1]))
    {
      sbx_cli_help ("completion");
      return 0;
    }
  if (argc != 2)
    {
      sbx_cli_usage ("completion: expected bash or zsh");
      return SBX_EXIT_USAGE;
    }
  return sbx_cli_print_completion (argv[1]);
}
