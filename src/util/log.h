/* sbx: daemon log lines on stderr ("2026-11-29T15:53:11Z sbxd[42] warn: ..."). */
#ifndef SBX_UTIL_LOG_H
#define SBX_UTIL_LOG_H

enum sbx_log_level
{
  SBX_LOG_DEBUG,
  SBX_LOG_INFO,
  SBX_LOG_WARN,
  SBX_LOG_ERROR,
};

void sbx_log_set_level (enum sbx_log_level level);
void sbx_log (enum sbx_log_level level, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

#define sbx_debug(...) sbx_log (SBX_LOG_DEBUG, __VA_ARGS__)
#define sbx_info(...) sbx_log (SBX_LOG_INFO, __VA_ARGS__)
#define sbx_warn(...) sbx_log (SBX_LOG_WARN, __VA_ARGS__)
#define sbx_error(...) sbx_log (SBX_LOG_ERROR, __VA_ARGS__)

#endif
