// Package cron runs OJS cron jobs (ojs-http-binding.md 13, L2-CRON-001..003).
package cron
