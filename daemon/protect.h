/* protect.h: what protect_defaults hides and keeps read-only: the one list.
 *
 * Credentials and secrets are hidden (an empty read-only directory, or /dev/null, is
 * mounted over them) under every home directory on the host: /root whole, each
 * directory of /home, each home of /etc/passwd that is not a system directory, and the
 * daemon user's $HOME. The list follows what the strongest local agent sandboxes hide,
 * one group a line: version control and code hosts, package registries, container and
 * cluster access, cloud CLIs, infrastructure tools, netrc, ssh and gpg, databases,
 * password stores and keyrings, browser profiles, X and Wayland authority, shell and
 * REPL histories. A path that does not exist yet is watched and hidden when it appears
 * (guard.h). Inside writable paths, the files that make the host run code or change
 * how it treats the tree (a repository's git configuration, hooks and the files git
 * follows to other configuration; shell start-up files; editor settings) are kept
 * read-only.
 *
 * Included by credcache.c, which expands the secrets under every home, by policy.c,
 * which keeps the writable names read-only, and by the tests, which check every entry.
 * Adding an entry here is all it takes to protect it. */
#ifndef SBX_PROTECT_H
#define SBX_PROTECT_H

/* clang-format off */

/* Hidden below every home directory. */
static const char *const protect_home_secrets[] = {
        /* ssh and gpg */
        ".ssh", ".gnupg",
        /* git credentials and credential helpers' stores */
        ".git-credentials", ".config/git/credentials", ".git-credential-cache",
        ".cache/git/credential", ".gcm",
        /* code hosts: GitHub (gh, hub), GitLab */
        ".config/gh", ".config/hub", ".config/glab-cli",
        /* package registries: npm, yarn, pnpm, pip, poetry, twine, cargo, gem, composer,
         * maven, gradle, ivy */
        ".npmrc", ".yarnrc", ".yarnrc.yml", ".config/pnpm", ".pypirc", ".config/pip",
        ".pip", ".config/pypoetry", ".cargo/credentials", ".cargo/credentials.toml",
        ".gem/credentials", ".composer/auth.json", ".config/composer/auth.json",
        ".m2/settings.xml", ".m2/settings-security.xml", ".gradle/gradle.properties",
        ".ivy2/.credentials",
        /* containers and clusters: docker, podman, kubernetes */
        ".docker", ".config/containers/auth.json", ".kube",
        /* cloud CLIs: aws, gcloud, azure, oci, doctl, s3cmd, boto, rclone, hcloud,
         * databricks, hugging face */
        ".aws", ".config/gcloud", ".azure", ".oci", ".config/doctl", ".s3cfg", ".boto",
        ".config/rclone", ".config/hcloud", ".databrickscfg", ".huggingface",
        ".cache/huggingface/token",
        /* infrastructure tools: terraform, vault */
        ".terraform.d", ".terraformrc", ".vault-token",
        /* netrc */
        ".netrc", "_netrc",
        /* databases */
        ".pgpass", ".my.cnf", ".mylogin.cnf",
        /* password stores and keyrings */
        ".password-store", ".local/share/keyrings", ".gnome2/keyrings",
        ".local/share/kwalletd", ".config/op", ".config/Bitwarden CLI",
        /* browser profiles (cookies are credentials) */
        ".mozilla", ".config/google-chrome", ".config/chromium",
        /* X and Wayland authority */
        ".Xauthority", ".ICEauthority",
        /* shell and REPL histories */
        ".bash_history", ".zsh_history", ".zhistory", ".histfile", ".sh_history",
        ".local/share/fish", ".python_history", ".node_repl_history", ".psql_history",
        ".mysql_history", ".sqlite_history", ".rediscli_history", ".irb_history",
        ".lesshst", ".viminfo",
};

/* Hidden on the host (globs allowed). */
static const char *const protect_host_secrets[] = {
        "/root",
        "/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-",
        "/etc/ssh/*_key", "/etc/krb5.keytab",
        "/run", "/var/run",                                   /* runtime sockets, /run/user */
        "/var/lib/docker", "/var/lib/containerd", "/var/lib/containers",
};

/* Kept read-only inside each writable path. The git entries are what git reads as
 * configuration or follows to configuration or hooks: config, config.worktree,
 * commondir (another repository's config and hooks), hooks, info (attributes,
 * excludes, sparse checkout), worktrees and modules (other repositories' git dirs),
 * objects/info (alternates), remotes and branches (old remote definitions). What git
 * writes in normal use (objects, refs, logs, the index, HEAD and the other top-level
 * state files) stays writable. */
static const char *const protect_writable_names[] = {
        ".git/config", ".git/config.worktree", ".git/commondir", ".git/hooks", ".git/info",
        ".git/worktrees", ".git/modules", ".git/objects/info", ".git/remotes",
        ".git/branches",
        ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc",
        ".zprofile", ".zshenv", ".zlogin", ".inputrc",
        ".vimrc", ".vim", ".exrc", ".emacs", ".emacs.d", ".vscode", ".idea",
        ".editorconfig", ".envrc",
};

/* clang-format on */

#define PROTECT_N(a) (sizeof(a) / sizeof((a)[0]))

#endif
