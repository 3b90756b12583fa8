"""Tell open thread sockets when the access they were opened with may have gone."""

from django.conf import settings
from django.contrib.auth.signals import user_logged_out
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from calvin.dashboard.events import access_recheck_on_commit, login_ended_push
from calvin.workspaces.models import Member


@receiver(user_logged_out)
def close_sockets_of_the_ended_login(sender, request, user, **kwargs):
    session_key = getattr(getattr(request, "session", None), "session_key", None)
    if session_key:
        login_ended_push(session_key)


@receiver(post_delete, sender=Member)
def recheck_after_membership_deleted(sender, instance, **kwargs):
    if instance.user_id:
        access_recheck_on_commit(instance.user_id)


@receiver(post_save, sender=settings.AUTH_USER_MODEL)
def recheck_after_user_changed(sender, instance, created, update_fields=None, **kwargs):
    # Deactivation and a password change (other logins' session hash) end access; a new user
    # has no sockets, and a login's own last_login update changes nothing.
    if not created and (update_fields is None or set(update_fields) != {"last_login"}):
        access_recheck_on_commit(instance.pk)


@receiver(post_delete, sender=settings.AUTH_USER_MODEL)
def recheck_after_user_deleted(sender, instance, **kwargs):
    access_recheck_on_commit(instance.pk)
