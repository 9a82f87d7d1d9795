# tcplab for a class on one Linux server: JupyterHub, each learner a system user.
#
# Each learner logs in with their system account (PAM) and gets a JupyterLab server running as
# themselves (LocalProcessSpawner), with the course's released notebooks in ~/tcplab (copied at
# their first start). Their lab runs on the server's own kernel in a user namespace of their
# own where the kernel allows it (tcplab's kernel=auto: no root, no second kernel), else in a
# User-mode Linux kernel; their measurements queue machine-wide, one at a time (a learner sees
# their place in the notebook). See docs/deploying.md, "JupyterHub on one server".
#
#     sudo /opt/tcplab/.venv/bin/jupyterhub -f /opt/tcplab/deploy/jupyterhub/jupyterhub_config.py
#
# Settings a site changes come from the environment, so that this file stays as it is:
#   TCPLAB_CHECKOUT   where the course lives, after `make setup` and `make release` (/opt/tcplab)
#   TCPLAB_HUB_URL    where the hub listens (http://127.0.0.1:8000; put TLS in front of it)
#   TCPLAB_LEARNERS   comma-separated user names allowed to log in (unset: any system user)
#   TCPLAB_ADMINS     comma-separated teachers (JupyterHub admins)
#   TCPLAB_HUB_STATE  where the hub keeps its database and cookie secret (/srv/tcplab-hub)
#   TCPLAB_RELEASED   the notebooks each learner gets (the checkout's release/, from `make release`)

import os
import shutil
import subprocess
from pathlib import Path

c = get_config()  # noqa: F821  (JupyterHub's config loader provides it)

CHECKOUT = Path(os.environ.get("TCPLAB_CHECKOUT", "/opt/tcplab"))
VENV = CHECKOUT / ".venv"
STATE = Path(os.environ.get("TCPLAB_HUB_STATE", "/srv/tcplab-hub"))
#: The notebooks students run (`make release`: no answers, no outputs).
RELEASED = Path(os.environ.get("TCPLAB_RELEASED", CHECKOUT / "release"))

c.JupyterHub.bind_url = os.environ.get("TCPLAB_HUB_URL", "http://127.0.0.1:8000")
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(STATE / "jupyterhub.pid")
# The proxy `make setup` installs from npm beside the .venv.
c.ConfigurableHTTPProxy.command = [str(VENV / "node" / "node_modules" / ".bin" / "configurable-http-proxy")]
c.ConfigurableHTTPProxy.pid_file = str(STATE / "jupyterhub-proxy.pid")

c.JupyterHub.authenticator_class = "pam"
if learners := os.environ.get("TCPLAB_LEARNERS"):
    c.Authenticator.allowed_users = {u.strip() for u in learners.split(",") if u.strip()}
if admins := os.environ.get("TCPLAB_ADMINS"):
    c.Authenticator.admin_users = {u.strip() for u in admins.split(",") if u.strip()}

# Every learner's server is the checkout's .venv, run as that learner (it must be readable by
# all: `make setup` builds it from /usr/bin/python3 for that reason).
c.Spawner.cmd = [str(VENV / "bin" / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~/tcplab"
c.Spawner.environment = {
    "PATH": f"{VENV / 'bin'}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
    # How long a learner's measurement waits for the machine before it runs anyway, marked
    # "machine too busy" (s); the queue shows them their place meanwhile.
    "TCPLAB_QUEUE_WAIT": os.environ.get("TCPLAB_QUEUE_WAIT", "1800"),
}
# The user-namespace lab starts in about a second and the course's first cell in a few; a
# UML kernel boots in about 5 s more.
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 60


def give_the_course(spawner):
    """At a learner's first start: the released notebooks in ~/tcplab, theirs to edit (a
    later start leaves their work alone)."""
    import pwd

    account = pwd.getpwnam(spawner.user.name)
    home = Path(account.pw_dir)
    target = home / "tcplab"
    if target.exists():
        return
    if not RELEASED.is_dir():
        raise RuntimeError(f"no released notebooks in {RELEASED}: run `make release` in {CHECKOUT} first")
    shutil.copytree(RELEASED, target)
    subprocess.run(["chown", "-R", f"{account.pw_uid}:{account.pw_gid}", str(target)], check=True)


c.Spawner.pre_spawn_hook = give_the_course

# A server nobody used for an hour is stopped (its lab, queue tickets and namespaces go with
# it); `pip install jupyterhub-idle-culler` and uncomment:
# c.JupyterHub.services = [{"name": "idle-culler", "command": [str(VENV / "bin" / "python"), "-m",
#                           "jupyterhub_idle_culler", "--timeout=3600"]}]
# c.JupyterHub.load_roles = [{"name": "idle-culler", "services": ["idle-culler"],
#                             "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]}]
